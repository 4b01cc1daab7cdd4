"""Tiny random Hugging Face models for the interop tests, saved with save_pretrained.

Every parameter (biases and norm weights included) is perturbed away from transformers' initial
values, so that a mixed-up name, a missing transpose or a skipped bias shows up in the comparison.
"""
import torch
import transformers

VOCAB = 300  # >= 256: the test data are bytes
POSITIONS = 32


def make(kind, seed=0):
    """A fp32 model: 'gpt2-tied', 'gpt2-untied' or 'llama' (kv_heads 2 < heads 4)."""
    torch.manual_seed(seed)
    if kind.startswith("gpt2"):
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=POSITIONS, n_embd=32, n_layer=4, n_head=4,
            activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            tie_word_embeddings=kind == "gpt2-tied", bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
    elif kind == "llama":
        config = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
            rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(config)
    else:
        raise ValueError(kind)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.float()


def save(kind, folder, seed=0, **kwargs):
    """make(kind) saved to `folder` as safetensors; returns the model."""
    model = make(kind, seed)
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
        out["ln_f.weight"] = ("model.norm.weight", False)
    # The head (its own weight, or the last stage's copy of the tied embedding, whose gradient is the
    # shared weight's after ppctl sums the two copies).
    tied = kind == "gpt2-tied"
    out["lm_head.weight"] = (out["tok_embed.weight"][0] if tied else "lm_head.weight", False)
    return out
