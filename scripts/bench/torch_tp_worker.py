#!/usr/bin/env python3
"""One rank of the PyTorch tensor-parallel peer that scripts/bench/tp_vs_dtensor.py compares ppctl with.

Started with the venv's python as the launcher of all ranks (`--nprocs N`: torch.multiprocessing.spawn,
one process per rank), Gloo on CPU. The model is the Llama of torch_pipelining_worker.py (transformers'
own LlamaDecoderLayer, LlamaRMSNorm and LlamaRotaryEmbedding, sdpa attention, untied head, ppctl's
initial distributions); the ranks form a 2-D DeviceMesh ("pp", "tp"), tp fastest as ppctl orders them
(rank = pp_rank x tp + tp_rank), and each pipeline stage's module gets the tensor-parallel plan of
torchtitan's parallelize_llama (torch.distributed.tensor.parallel):
  * q_proj, k_proj, v_proj, gate_proj, up_proj: ColwiseParallel; o_proj, down_proj: RowwiseParallel;
  * the token embedding: RowwiseParallel (split by vocabulary rows); the LM head: ColwiseParallel with
    its output left sharded over the vocabulary (Shard(-1)) for loss_parallel's cross-entropy;
  * with sequence parallelism (the config's pipeline.sequence_parallel): the norms SequenceParallel,
    PrepareModuleInput (Shard(1) -> Replicate(): an all-gather) before attention and the MLP,
    o_proj and down_proj reducing-scattering into Shard(1), the embedding's output Shard(1), and the
    head's input Shard(1); without it, the residual stream is replicated and o_proj and down_proj
    all-reduce (the norms are plain modules).
With one pipeline stage (pp 1) a step is m microbatches of forward and backward (the loss of each
divided by m) and one AdamW step; with pp > 1 the stages are torch.distributed.pipelining PipelineStages
over the mesh's pp groups (each tp rank sends to the same tp rank of the next stage, as in ppctl), run by
ScheduleGPipe or Schedule1F1B, the whole schedule step under loss_parallel (as torchtitan's train context).
Data: random non-overlapping windows of seq_len + 1 bytes of the same text files ppctl reads (each tp
rank draws the same windows).

Prints machine-readable lines starting with `BENCH ` (JSON): global rank (pp - 1) x tp (the first tp
rank of the last stage) one per step (loss, wall time since the previous step ended), every rank one at
the end (peak resident set). Usage (normally via tp_vs_dtensor.py):
  python torch_tp_worker.py --config job.json --nprocs N
"""
import os
import resource
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe  # noqa: E402
from torch.distributed.tensor import DTensor, Replicate, Shard  # noqa: E402
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,  # noqa: E402
                                               SequenceParallel, loss_parallel, parallelize_module)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_pipelining_worker import (ByteWindows, LlamaStage, emit, free_port, init_worker,  # noqa: E402
                                     make_optimizer, start_worker)

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


class TpLlamaStage(LlamaStage):
    """LlamaStage whose rotary positions are those of the whole sequence: under sequence parallelism the
    residual stream a stage sees holds seq_len / tp positions, but attention runs on all of them (its
    input is all-gathered first), so cos and sin are always computed for seq_len positions."""

    def __init__(self, model, begin, end, first, last):
        super().__init__(model, begin, end, first, last)
        self.seq_len = model["seq_len"]

    def forward(self, x):
        if self.tok_embed is not None:
            x = self.tok_embed(x)
        positions = torch.arange(self.seq_len, device=x.device).unsqueeze(0)
        rotary = self.rotary(x if not isinstance(x, DTensor) else x.to_local(), positions)
        for block in self.blocks:
            x = block(x, position_embeddings=rotary)
        if self.lm_head is not None:
            x = self.lm_head(self.ln_f(x))
        return x


def parallelize(module, tp_mesh, sequence_parallel):
    """torchtitan's parallelize_llama plan (apply_tp) on one stage's module, names as transformers' Llama."""
    shard_seq = Shard(1) if sequence_parallel else Replicate()
    top = {}
    if module.tok_embed is not None:
        top["tok_embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=shard_seq)
    if module.lm_head is not None:
        top["lm_head"] = ColwiseParallel(input_layouts=shard_seq, output_layouts=Shard(-1), use_local_output=False)
        if sequence_parallel:
            top["ln_f"] = SequenceParallel()
    if top:
        parallelize_module(module, tp_mesh, top)
    for block in module.blocks:
        plan = {
            "self_attn.q_proj": ColwiseParallel(),
            "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(),
            "self_attn.o_proj": RowwiseParallel(output_layouts=shard_seq),
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=shard_seq),
        }
        if sequence_parallel:
            plan |= {
                "input_layernorm": SequenceParallel(),
                "post_attention_layernorm": SequenceParallel(),
                "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                desired_input_kwarg_layouts={"hidden_states": Replicate()},
                                                use_local_output=False),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                          use_local_output=False),
            }
        parallelize_module(block, tp_mesh, plan)


def cross_entropy(logits, targets):
    """Mean cross-entropy; with the logits a DTensor sharded over the vocabulary, under loss_parallel."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def scalar(loss):
    loss = loss.detach()
    return float(loss.full_tensor() if isinstance(loss, DTensor) else loss)


def main():
    cfg, args = start_worker(__doc__, "tp_vs_dtensor.py", launcher=True)
    if args.nprocs is None:
        raise SystemExit("torch_tp_worker.py: give --nprocs N (tp x pp ranks)")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    torch.multiprocessing.spawn(train_rank, args=(args.nprocs, cfg), nprocs=args.nprocs)


def train_rank(rank, world, cfg):
    init_worker(cfg)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, pipe = cfg["model"], cfg["pipeline"]
    tp, pp, sp = pipe["tensor_parallel"], pipe["stages"], pipe["sequence_parallel"]
    if tp * pp != world:
        raise SystemExit(f"torch_tp_worker.py: {world} ranks for tp {tp} x pp {pp}")
    mesh = init_device_mesh("cpu", (pp, tp), mesh_dim_names=("pp", "tp"))
    pp_rank, tp_rank = rank // tp, rank % tp
    first, last = pp_rank == 0, pp_rank == pp - 1
    torch.manual_seed(cfg["seed"] + pp_rank)  # every tp rank of a stage draws the same whole weights
    module = TpLlamaStage(model, *cfg["blocks"][pp_rank], first, last)
    if tp > 1:
        parallelize(module, mesh["tp"], sp)
    module.train()
    optimizer = make_optimizer(module, cfg["optimizer"])
    mbs, m, seq, hidden = pipe["micro_batch_size"], pipe["microbatches"], model["seq_len"], model["hidden"]
    data = ByteWindows(cfg["data"], seq, cfg["seed"]) if first or last else None
    schedule = None
    if pp > 1:
        local_seq = seq // tp if sp and tp > 1 else seq
        example_input = torch.zeros(mbs, seq, dtype=torch.long) if first else torch.empty(mbs, local_seq, hidden)
        example_output = torch.empty(mbs, seq, model["vocab_size"]) if last else torch.empty(mbs, local_seq, hidden)
        stage = PipelineStage(module, pp_rank, pp, torch.device("cpu"), input_args=example_input,
                              output_args=example_output, group=mesh["pp"].get_group())
        schedule = SCHEDULES[pipe["schedule"]](stage, n_microbatches=m, loss_fn=cross_entropy)
    reports = rank == (pp - 1) * tp

    previous_end = time.perf_counter()
    for step in range(cfg["steps"]):
        optimizer.zero_grad(set_to_none=True)
        tokens, targets = data.batch(m * mbs) if data is not None else (None, None)
        losses = []
        with loss_parallel() if tp > 1 else torch.enable_grad():
            if schedule is not None:
                schedule.step(*((tokens,) if first else ()), target=targets if last else None,
                              losses=losses if last else None, return_outputs=False)
            else:
                for mb in range(m):
                    rows = slice(mb * mbs, (mb + 1) * mbs)
                    loss = cross_entropy(module(tokens[rows]), targets[rows])
                    (loss / m).backward()
                    losses.append(loss.detach())
        optimizer.step()
        now = time.perf_counter()
        if reports:
            emit({"step": step + 1, "loss": sum(scalar(l) for l in losses) / len(losses),
                  "seconds": now - previous_end})
        previous_end = now
    emit({"rank": rank, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
