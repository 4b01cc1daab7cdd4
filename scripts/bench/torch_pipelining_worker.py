#!/usr/bin/env python3
"""One rank of the torch.distributed.pipelining peer that scripts/bench/vs_torch.py compares ppctl with.

Started with the venv's python, either as the launcher of all ranks (`--nprocs P`:
torch.multiprocessing.spawn, one process per pipeline stage; what vs_torch.py does) or as one rank
under torchrun. Gloo on CPU. Builds its
stage of a GPT written to match lib/model/gpt2.cpp (GPT-2 pre-norm blocks, learned positions, GELU MLP
of 4 x hidden, causal scaled_dot_product_attention, final LayerNorm, LM head without bias, byte
vocabulary, mean cross-entropy), or with model.arch "llama" of a Llama built from Hugging Face
transformers' own LlamaDecoderLayer, LlamaRMSNorm and LlamaRotaryEmbedding (sdpa attention, the
shape of lib/model/llama.cpp: grouped-query attention, SwiGLU, untied head), wraps each of its stages in a
PipelineStage and trains them with the library's own schedule class (SCHEDULES: ppctl's name -> torch's
class) and torch.optim.AdamW with ppctl's parameter groups. With virtual stages a rank holds several
stages, placed as ppctl places them: stage k on rank k mod p (interleaved), or ranks r and 2p-1-r (zbv).
Data: random non-overlapping windows of seq_len + 1 bytes of the same text files ppctl reads.

Prints machine-readable lines starting with `BENCH ` (JSON): the last rank one per step (loss, wall
time since the previous step ended), every rank one at the end (peak resident set, bytes saved for
backward counted during the last warm-up step, mean F, B, I and W time over the timed steps). The rank
that holds the last stage (rank p-1, or rank 0 under zbv) prints the step lines. Usage
(normally via vs_torch.py):
  python torch_pipelining_worker.py --config job.json --nprocs P
  torchrun --standalone --nproc-per-node P torch_pipelining_worker.py --config job.json
"""
import argparse
import contextlib
import glob
import json
import math
import os
import resource
import socket
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402  (after the filter: torch warns about a missing NumPy on import)
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,  # noqa: E402
                                          ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble,
                                          ScheduleZBVZeroBubble)

# ppctl's schedule name -> torch's class. zb-h1 (one stage per rank, backward split into I and W, W
# deferred into the bubbles) has no class of its own in torch: ScheduleInterleavedZeroBubble (the ZB1P
# schedule of arXiv 2401.10241) given one stage per rank is its closest equivalent.
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved-1f1b": ScheduleInterleaved1F1B,
             "zbv": ScheduleZBVZeroBubble, "zb-h1": ScheduleInterleavedZeroBubble,
             "zb-auto": ScheduleInterleavedZeroBubble}  # zb-auto: W placed from costs; torch has no such class
MULTI_STAGE = ("interleaved-1f1b", "zbv", "zb-h1", "zb-auto")  # the classes that take a list of stages
INIT_STD = 0.02


def emit(record):
    """One line in a single write(2), so that lines of ranks sharing the pipe never interleave."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("BENCH " + json.dumps(record) + "\n").encode())


class Block(nn.Module):
    """x + attn(ln1(x)), then + mlp(ln2(x)), as ppctl's BlockImpl (no dropout: the benchmark uses 0)."""

    def __init__(self, hidden, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)
        residual_std = INIT_STD / math.sqrt(2.0 * layers)
        for linear, std in ((self.qkv, INIT_STD), (self.proj, residual_std), (self.fc1, INIT_STD),
                            (self.fc2, residual_std)):
            nn.init.normal_(linear.weight, 0.0, std)
            nn.init.zeros_(linear.bias)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        split = lambda t: t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)  # noqa: E731
        attn = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        h = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, hidden))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class LlamaStage(nn.Module):
    """The Llama counterpart of Stage from transformers' modules (no position embedding: every stage
    rotates its own q and k), initialised as ppctl's llama: norms 1, weights N(0, 0.02), o_proj and
    down_proj N(0, 0.02 / sqrt(2 layers))."""

    def __init__(self, model, begin, end, first, last):
        super().__init__()
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding
        hidden = model["hidden"]
        config = LlamaConfig(vocab_size=model["vocab_size"], hidden_size=hidden,
                             intermediate_size=model["ffn_hidden"], num_hidden_layers=model["layers"],
                             num_attention_heads=model["heads"], num_key_value_heads=model["kv_heads"],
                             max_position_embeddings=model["seq_len"], rms_norm_eps=1e-5, rope_theta=10000.0,
                             attention_bias=False, mlp_bias=False, tie_word_embeddings=False)
        config._attn_implementation = "sdpa"
        self.tok_embed = nn.Embedding(model["vocab_size"], hidden) if first else None
        if first:
            nn.init.normal_(self.tok_embed.weight, 0.0, INIT_STD)
        self.rotary = LlamaRotaryEmbedding(config)
        self.blocks = nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(begin, end))
        residual_std = INIT_STD / math.sqrt(2.0 * model["layers"])
        for name, p in self.blocks.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, residual_std if ("o_proj" in name or "down_proj" in name) else INIT_STD)
        self.ln_f = LlamaRMSNorm(hidden, eps=1e-5) if last else None
        self.lm_head = nn.Linear(hidden, model["vocab_size"], bias=False) if last else None
        if last:
            nn.init.normal_(self.lm_head.weight, 0.0, INIT_STD)

    def forward(self, x):
        if self.tok_embed is not None:
            x = self.tok_embed(x)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        rotary = self.rotary(x, positions)
        for block in self.blocks:
            x = block(x, position_embeddings=rotary)
        if self.lm_head is not None:
            x = self.lm_head(self.ln_f(x))
        return x


class Stage(nn.Module):
    """Blocks [begin, end), plus the embedding on the first stage and the final norm and LM head on the
    last: the same split ppctl's plan prints (vs_torch.py passes it in, one [begin, end) per stage)."""

    def __init__(self, model, begin, end, first, last):
        super().__init__()
        hidden = model["hidden"]
        self.tok_embed = nn.Embedding(model["vocab_size"], hidden) if first else None
        self.pos_embed = nn.Embedding(model["seq_len"], hidden) if first else None
        if first:
            nn.init.normal_(self.tok_embed.weight, 0.0, INIT_STD)
            nn.init.normal_(self.pos_embed.weight, 0.0, INIT_STD)
        self.blocks = nn.ModuleList(Block(hidden, model["heads"], model["layers"]) for _ in range(begin, end))
        self.ln_f = nn.LayerNorm(hidden) if last else None
        self.lm_head = nn.Linear(hidden, model["vocab_size"], bias=False) if last else None
        if last:
            nn.init.normal_(self.lm_head.weight, 0.0, INIT_STD)

    def forward(self, x):
        if self.tok_embed is not None:
            x = self.tok_embed(x) + self.pos_embed(torch.arange(x.shape[1], device=x.device)).unsqueeze(0)
        for block in self.blocks:
            x = block(x)
        if self.lm_head is not None:
            x = self.lm_head(self.ln_f(x))
        return x


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(module, opt):
    """AdamW with ppctl's groups: weight decay on tensors of two or more dimensions only."""
    params = list(module.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"],
                             weight_decay=opt["weight_decay"])


class ByteWindows:
    """The text files' bytes concatenated (sorted paths, as ppctl) and cut into windows of seq_len + 1
    bytes with stride seq_len; each step draws global-batch-many windows at random (seeded)."""

    def __init__(self, patterns, seq_len, seed):
        files = sorted({os.path.realpath(f) for p in patterns for f in glob.glob(p) if os.path.isfile(f)})
        data = b"".join(open(f, "rb").read() for f in files)
        self.bytes = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self.seq_len = seq_len
        self.windows = (len(data) - 1) // seq_len
        self.offsets = torch.arange(seq_len + 1)
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, sequences):
        starts = torch.randint(self.windows, (sequences, 1), generator=self.generator) * self.seq_len
        window = self.bytes[starts + self.offsets].long()
        return window[:, :-1].contiguous(), window[:, 1:].contiguous()


class SavedBytes:
    """Bytes of tensors autograd holds for backward (saved_tensors_hooks), counted once per storage,
    parameters excluded; `peak` is the high-water mark. Comparable to ppctl's `kept for backward`."""

    def __init__(self, parameters):
        self.params = {p.untyped_storage().data_ptr() for p in parameters}
        self.refs = {}
        self.live = 0
        self.peak = 0

    def pack(self, tensor):
        key = tensor.untyped_storage().data_ptr()
        if key in self.params or tensor.device.type != "cpu":
            return tensor
        return _Held(self, key, tensor)

    @staticmethod
    def unpack(held):
        return held.tensor if isinstance(held, _Held) else held

    def add(self, key, nbytes):
        count = self.refs.get(key, 0)
        self.refs[key] = count + 1
        if count == 0:
            self.live += nbytes
            self.peak = max(self.peak, self.live)

    def remove(self, key, nbytes):
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.live -= nbytes


class _Held:
    def __init__(self, meter, key, tensor):
        self.meter, self.key, self.tensor = meter, key, tensor
        self.nbytes = tensor.untyped_storage().nbytes()
        meter.add(key, self.nbytes)

    def __del__(self):
        self.meter.remove(self.key, self.nbytes)


class ComputeTimer:
    """Wall time of the schedule's compute actions, as ppctl's timing line counts them: F is
    forward_one_chunk (plus the loss on the last stage), B is backward_one_chunk with full_backward,
    I is backward_one_chunk without it (input gradient only) and W is backward_weight_one_chunk.
    Wraps the methods of every stage of the rank and of the schedule object; counts only while `on`;
    the means are over all the rank's stages, as ppctl's per-rank timing line."""

    def __init__(self):
        self.ms = {k: 0.0 for k in "FBIW"}
        self.count = {k: 0 for k in "FBIW"}
        self.on = False

    def wrap(self, owner, method, kind_of, counts=True):
        """Times `owner.method`; `kind_of(kwargs)` names the kind of one call."""
        inner = getattr(owner, method)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                if self.on:
                    kind = kind_of(kwargs)
                    self.ms[kind] += 1000.0 * (time.perf_counter() - start)
                    self.count[kind] += 1 if counts else 0

        setattr(owner, method, timed)

    def wrap_stage(self, stage):
        self.wrap(stage, "forward_one_chunk", lambda kwargs: "F")
        self.wrap(stage, "backward_one_chunk", lambda kwargs: "B" if kwargs.get("full_backward", True) else "I")
        self.wrap(stage, "backward_weight_one_chunk", lambda kwargs: "W")

    def means(self):
        return {k: self.ms[k] / self.count[k] if self.count[k] else 0.0 for k in self.ms}


def skip_self_sends(stage, rank):
    """Drops the messages a stage would send to its own rank in the schedule's first-step handshake
    (`_get_init_p2p_neighbors_ops`, private): under zbv rank p-1 holds the adjacent stages p-1 and p,
    torch 2.11 then posts a send and a receive to itself there, and Gloo has no connection to its own
    rank ("Pair is not connected"). The steps themselves hand such tensors over in memory (torch's
    "V-schedule special case"), so nothing but the handshake is skipped."""
    inner = stage._get_init_p2p_neighbors_ops
    stage._get_init_p2p_neighbors_ops = lambda: [op for op in inner() if op.group_peer != rank]


def stage_indices(schedule, rank, world, virtual_stages):
    """The stages rank `rank` holds, as ppctl places them: k on rank k mod p, or the V of zbv."""
    if schedule == "zbv":
        return [rank, 2 * world - 1 - rank]
    return [rank + world * chunk for chunk in range(virtual_stages)]


def start_worker(description, written_by, launcher=False):
    """Parses `--config JSON` (written by the driver script `written_by`) and, for the pipeline worker,
    `--nprocs`; returns (configuration, arguments)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help=f"JSON written by {written_by}")
    if launcher:
        parser.add_argument("--nprocs", type=int,
                            help="start this many ranks with torch.multiprocessing (without it: one rank, "
                                 "RANK and WORLD_SIZE from the environment, as torchrun sets them)")
    args = parser.parse_args()
    with open(args.config) as f:
        return json.load(f), args


def init_worker(cfg):
    """Thread counts first, before any parallel work (as ppctl's worker does), then the seed."""
    torch.set_num_threads(cfg["threads"])
    torch.set_num_interop_threads(1)
    torch.manual_seed(cfg["seed"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    cfg, args = start_worker(__doc__, "vs_torch.py", launcher=True)
    if args.nprocs is None:
        train_rank(None, None, cfg)
        return
    # Spawned ranks stay in this process's session (torchrun starts each in a new one): with the
    # kernel's autogroup scheduling they then share the CPU as ppctl's workers do on a busy machine.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    torch.multiprocessing.spawn(train_rank, args=(args.nprocs, cfg), nprocs=args.nprocs)


def train_rank(rank, world, cfg):
    """One rank: `rank` and `world` from torch.multiprocessing.spawn, or None to read the environment."""
    init_worker(cfg)
    if rank is None:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise SystemExit("torch_pipelining_worker.py: needs at least 2 ranks (one per stage)")
    model, pipe = cfg["model"], cfg["pipeline"]
    virtual_stages = pipe.get("virtual_stages", 1)
    num_stages = world * virtual_stages
    indices = stage_indices(pipe["schedule"], rank, world, virtual_stages)
    holds_first, holds_last = 0 in indices, num_stages - 1 in indices
    build = LlamaStage if model.get("arch") == "llama" else Stage
    modules = nn.ModuleList(build(model, *cfg["blocks"][k], k == 0, k == num_stages - 1) for k in indices)
    modules.train()
    # Static shapes (as ppctl, which knows them from the spec): no shape inference at the first step.
    mbs, seq, hidden = pipe["micro_batch_size"], model["seq_len"], model["hidden"]
    stages = []
    for k, module in zip(indices, modules):
        example_input = torch.zeros(mbs, seq, dtype=torch.long) if k == 0 else torch.empty(mbs, seq, hidden)
        example_output = torch.empty(mbs, seq, model["vocab_size"] if k == num_stages - 1 else hidden)
        stages.append(PipelineStage(module, k, num_stages, torch.device("cpu"), input_args=example_input,
                                    output_args=example_output))
    for stage in stages:
        skip_self_sends(stage, rank)
    # Every rank passes the loss: the schedule runs backward only when it has one.
    multi = pipe["schedule"] in MULTI_STAGE
    schedule = SCHEDULES[pipe["schedule"]](stages if multi else stages[0], n_microbatches=pipe["microbatches"],
                                           loss_fn=cross_entropy)
    timer = ComputeTimer()
    for stage in stages:
        timer.wrap_stage(stage)
    # private; the loss is part of F in ppctl
    timer.wrap(schedule, "_maybe_compute_loss", lambda kwargs: "F", counts=False)
    optimizer = make_optimizer(modules, cfg["optimizer"])
    data = ByteWindows(cfg["data"], model["seq_len"], cfg["seed"]) if holds_first or holds_last else None
    sequences = pipe["microbatches"] * pipe["micro_batch_size"]
    saved = SavedBytes(modules.parameters())

    previous_end = time.perf_counter()
    for step in range(cfg["steps"]):
        timer.on = step >= cfg["warmup"]
        optimizer.zero_grad(set_to_none=True)
        tokens, targets = data.batch(sequences) if data is not None else (None, None)
        losses = []
        # The hooks cost a Python call per saved tensor: only the first step (untimed) counts, so that
        # with two or more warm-up steps the step before the timed ones runs as the timed ones do.
        hooks = (torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack)
                 if step == 0 else contextlib.nullcontext())
        with hooks:
            schedule.step(*((tokens,) if holds_first else ()), target=targets if holds_last else None,
                          losses=losses if holds_last else None, return_outputs=False)
        optimizer.step()
        now = time.perf_counter()
        if holds_last:
            emit({"step": step + 1, "loss": sum(float(l) for l in losses) / len(losses),
                  "seconds": now - previous_end})
        previous_end = now
    emit({"rank": rank, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
          "saved_for_backward_mib": saved.peak / 2**20, "compute_ms": timer.means()})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
