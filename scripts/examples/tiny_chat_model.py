"""Writes a tiny random Llama chat model folder (weights, byte-level BPE tokenizer, chat template) for the chat example.

The folder stands in for a small Hugging Face chat model, so that docs/fine-tuning.md's "Example: a chat model end
to end" runs offline: a LlamaForCausalLM with random weights (4 layers, hidden 64, 4 query heads sharing 2
key/value heads), and a byte-level BPE tokenizer trained with Hugging Face `tokenizers` on the texts of the
conversations file, saved by transformers with a ChatML-style chat template of this repository's own:

    <|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n

`<|im_end|>` is the end-of-sequence token, so generation stops at the end of an answer; the padding token
`<|endoftext|>` is another one. Usage (from the clone's root, with the venv of scripts/setup.sh):

    python scripts/examples/tiny_chat_model.py runs/chat-example/model

OUT_DIR must not exist yet or be empty. The same arguments write the same folder (fixed seed).
"""
import argparse
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CONVERSATIONS = REPO / "configs" / "chat" / "conversations.jsonl"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
# ChatML-style: every turn is <|im_start|>ROLE\nCONTENT<|im_end|>\n; the generation prompt opens an assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def conversation_texts(path):
    """Every message's content in the conversations file (messages, or prompt and completion)."""
    texts = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON ({e}); fix the line, or pass another --conversations file")
            for key in ("messages", "prompt", "completion"):
                value = record.get(key)
                if isinstance(value, str):
                    texts.append(value)
                elif isinstance(value, list):
                    texts += [m["content"] for m in value if isinstance(m, dict) and isinstance(m.get("content"), str)]
    if not texts:
        sys.exit(f"{path}: no conversation text found; pass a JSONL file of chat conversations (docs/data.md)")
    return texts


def train_tokenizer(texts, vocab_size):
    """A byte-level BPE (GPT-2's pre-tokenizer, all 256 bytes in the alphabet) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=pathlib.Path, help="the model folder to write (new or empty)")
    parser.add_argument("--conversations", type=pathlib.Path, default=DEFAULT_CONVERSATIONS,
                        help=f"JSONL conversations the tokenizer is trained on (default: {DEFAULT_CONVERSATIONS})")
    parser.add_argument("--vocab-size", type=int, default=512, help="BPE vocabulary, special tokens included")
    parser.add_argument("--max-positions", type=int, default=512,
                        help="max_position_embeddings: the longest model.seq_len a spec may use")
    args = parser.parse_args()
    if args.out_dir.exists() and (not args.out_dir.is_dir() or any(args.out_dir.iterdir())):
        sys.exit(f"{args.out_dir}: exists and is not an empty folder; remove it or name another")
    if not args.conversations.is_file():
        sys.exit(f"{args.conversations}: no such file; pass --conversations FILE (a chat JSONL file)")

    import torch
    import transformers

    tok = train_tokenizer(conversation_texts(args.conversations), args.vocab_size)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"], model_max_length=args.max_positions)
    tokenizer.chat_template = CHAT_TEMPLATE
    vocab = len(tokenizer)

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=176, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=args.max_positions, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    model = transformers.LlamaForCausalLM(config)
    model.generation_config.max_new_tokens = 40
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out_dir)
    tokenizer.save_pretrained(args.out_dir, save_jinja_files=False)  # the template inside tokenizer_config.json

    parameters = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out_dir}: LlamaForCausalLM, {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{config.num_attention_heads} heads / {config.num_key_value_heads} key-value heads, "
          f"{parameters:,} random parameters, max_position_embeddings {config.max_position_embeddings}")
    print(f"  tokenizer: byte-level BPE of {vocab} tokens trained on {args.conversations}; eos {tokenizer.eos_token} "
          f"(id {tokenizer.eos_token_id}), pad {tokenizer.pad_token} (id {tokenizer.pad_token_id}); ChatML-style "
          f"chat template in tokenizer_config.json")
    print("  files: " + ", ".join(sorted(p.name for p in args.out_dir.iterdir())))


if __name__ == "__main__":
    main()
