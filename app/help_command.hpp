// `ppctl help [FIELD]`: the job spec's fields in a terminal, and `--markdown` for docs/spec-reference.md. Torch-free,
// so the light `ppctl` answers it without loading LibTorch.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace ppctl::app {

/// The options of `ppctl help`.
struct HelpOptions {
  std::string topic;      ///< a section, a field (`pipeline.schedule`) or a bare key; empty = every field
  bool markdown = false;  ///< print the whole reference as Markdown (docs/spec-reference.md)
};

/// Adds the `help` subcommand to `app`; parsing writes into `options` (which must outlive `app.parse`).
CLI::App* add_help_command(CLI::App& app, HelpOptions& options);

/// Prints what `options` asks for (config::spec_help or config::spec_reference_markdown) to stdout; returns 0,
/// or prints the error and returns kExitBadInput (2) for a topic that is no section or field.
int run_help(const HelpOptions& options);

}  // namespace ppctl::app
