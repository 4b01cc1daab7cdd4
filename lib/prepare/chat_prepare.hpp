// `ppctl data prepare --input-format chat`: conversations rendered by the model's chat template, tokenized
// with its tokenizer.json (no special tokens added: the template writes them), written as a Megatron
// indexed dataset PREFIX.bin/.idx with the loss masks beside it as a second one, PREFIX.loss_mask.bin/.idx
// (uint8, the same sequence lengths). No torch.
#pragma once

#include <cstdio>

#include "prepare/prepare.hpp"

namespace ppctl::prepare {

/// Runs the chat preparation (options.input.format == kChat). Checked before anything is written: the
/// inputs, --tokenizer (a tokenizer.json: bytes and SentencePiece are refused), no --append-eod (the
/// template writes the end-of-turn tokens), the chat template (found and parsed), --chat-date,
/// --chat-context, the output folder. Each conversation is one sequence of both datasets; its mask is 1 on
/// the tokens of the assistant turns (prepare/loss_mask.hpp's rule) or on every token (--train-on all).
/// Throws prepare::PrepareError "INPUT:LINE: ..." for a bad line (prepare/chat_reader.hpp), a conversation
/// without an assistant message under --train-on assistant (refused, not skipped: a silently dropped line
/// hides a broken conversion), a template that raises or crosses a render limit (its message and file),
/// text the tokenizer refuses, a turn the mask rule cannot place; and when no token is a target. Nothing
/// is left behind then.
PrepareReport prepare_chat_dataset(const PrepareOptions& options, std::FILE* progress_out);

}  // namespace ppctl::prepare
