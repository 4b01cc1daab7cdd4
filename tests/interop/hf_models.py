"""Tiny random Hugging Face models for the interop tests, saved with save_pretrained.

Every parameter (biases and norm weights included) is perturbed away from transformers' initial
values, so that a mixed-up name, a missing transpose or a skipped bias shows up in the comparison.
"""
import torch
import transformers

VOCAB = 300  # >= 256: the test data are bytes
POSITIONS = 32


# The llama family: (config class, model class, config arguments). The RoPE scalings use a small
# original context (8 positions) so that they change the frequencies the 16-token test sequences use.
LLAMA_FAMILY = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
              dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)),
    "llama-llama3": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                     dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 8})),
    "llama-linear": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                     dict(rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0})),
    "llama-yarn": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                   dict(rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                         "original_max_position_embeddings": 8})),
    "qwen2-tied": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(tie_word_embeddings=True)),
    "qwen2-untied": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(tie_word_embeddings=False)),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(head_dim=12)),
    "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM, dict(sliding_window=64)),
}


def make(kind, seed=0, **config_args):
    """A fp32 model: 'gpt2-tied', 'gpt2-untied' or one of LLAMA_FAMILY (kv_heads 2 < heads 4); a llama-family
    config takes `config_args` over these (vocab_size, bos_token_id, ...)."""
    torch.manual_seed(seed)
    if kind.startswith("gpt2"):
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=POSITIONS, n_embd=32, n_layer=4, n_head=4,
            activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            tie_word_embeddings=kind == "gpt2-tied", bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
    elif kind in LLAMA_FAMILY:
        cls_config, cls_model, extra = LLAMA_FAMILY[kind]
        args = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                    rms_norm_eps=1e-5, **extra)
        config = cls_config(**{**args, **config_args})
        model = cls_model(config)
    else:
        raise ValueError(kind)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.float()


def save(kind, folder, seed=0, config_args=None, **kwargs):
    """make(kind, seed, **config_args) saved to `folder` as safetensors; returns the model."""
    model = make(kind, seed, **(config_args or {}))
    model.save_pretrained(folder, safe_serialization=True, **kwargs)
    return model


def load(folder):
    """transformers' own loading of a folder, eager attention, fp32."""
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32)


def ppctl_to_hf(kind, layers):
    """ppctl parameter name -> (HF parameter name, transposed), as in notes/interfaces.md; written
    here independently of lib/interop/hf_names.cpp so that the test checks that table."""
    out = {}
    if kind.startswith("gpt2"):
        out["tok_embed.weight"] = ("transformer.wte.weight", False)
        out["pos_embed.weight"] = ("transformer.wpe.weight", False)
        for i in range(layers):
            h = f"transformer.h.{i}."
            for ours, theirs, t in [("ln1", "ln_1", False), ("qkv", "attn.c_attn", True),
                                    ("proj", "attn.c_proj", True), ("ln2", "ln_2", False),
                                    ("fc1", "mlp.c_fc", True), ("fc2", "mlp.c_proj", True)]:
                out[f"block{i}.{ours}.weight"] = (h + theirs + ".weight", t)
                out[f"block{i}.{ours}.bias"] = (h + theirs + ".bias", False)
        out["ln_f.weight"] = ("transformer.ln_f.weight", False)
        out["ln_f.bias"] = ("transformer.ln_f.bias", False)
    else:
        out["tok_embed.weight"] = ("model.embed_tokens.weight", False)
        for i in range(layers):
            h = f"model.layers.{i}."
            for ours, theirs in [("attn_norm", "input_layernorm"), ("q_proj", "self_attn.q_proj"),
                                 ("k_proj", "self_attn.k_proj"), ("v_proj", "self_attn.v_proj"),
                                 ("o_proj", "self_attn.o_proj"), ("mlp_norm", "post_attention_layernorm"),
                                 ("gate_proj", "mlp.gate_proj"), ("up_proj", "mlp.up_proj"),
                                 ("down_proj", "mlp.down_proj")]:
                out[f"block{i}.{ours}.weight"] = (h + theirs + ".weight", False)
            if kind.startswith("qwen2"):
                for proj in ("q_proj", "k_proj", "v_proj"):
                    out[f"block{i}.{proj}.bias"] = (h + f"self_attn.{proj}.bias", False)
            if kind == "qwen3":
                for norm in ("q_norm", "k_norm"):
                    out[f"block{i}.{norm}.weight"] = (h + f"self_attn.{norm}.weight", False)
        out["ln_f.weight"] = ("model.norm.weight", False)
    # The head (its own weight, or the last stage's copy of the tied embedding, whose gradient is the
    # shared weight's after ppctl sums the two copies).
    tied = kind in ("gpt2-tied", "qwen2-tied")
    out["lm_head.weight"] = (out["tok_embed.weight"][0] if tied else "lm_head.weight", False)
    return out


def read_gradient_dump(folder):
    """(step-1 loss, {ppctl name: whole gradient}) from `ppctl train --dump-gradients FOLDER`'s rank*.pt files
    (torch::pickle_save of name -> tensor; "__loss__" and "__grad_norm__" taken out)."""
    import pathlib
    grads = {}
    for f in sorted(pathlib.Path(folder).glob("rank*.pt")):
        grads.update(torch.load(f, weights_only=False))
    loss = grads.pop("__loss__").item()
    grads.pop("__grad_norm__")
    return loss, grads


def hf_gradient(name, names, hf_grads, seq_len):
    """transformers' gradient of ppctl parameter `name` in ppctl's layout: transposed where the names table says
    so (GPT-2's Conv1D), the position table cut to the `seq_len` rows ppctl holds. Returns (HF name, tensor)."""
    hf_name, transposed = names[name]
    theirs = hf_grads[hf_name]
    if transposed:
        theirs = theirs.t()
    if name == "pos_embed.weight":
        theirs = theirs[:seq_len]
    return hf_name, theirs


def relative(a, b):
    """max |a - b| / max |b|, in float64."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
