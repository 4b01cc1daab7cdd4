// `ppctl help`: one field's doc, type, range and default, read off the schema (config/reference.hpp).
#include "help_command.hpp"

#include <CLI/CLI.hpp>

#include <iostream>

#include "command_line.hpp"
#include "config/reference.hpp"
#include "core/error.hpp"

namespace ppctl::app {

CLI::App* add_help_command(CLI::App& app, HelpOptions& options) {
  auto* help = app.add_subcommand("help", "Describe the job spec's fields: ppctl help [SECTION|FIELD], e.g. "
                                          "ppctl help pipeline.schedule");
  help->add_option("topic", options.topic, "A section (pipeline), a field (pipeline.schedule) or a bare key "
                                           "(microbatches); none: every field")
      ->check(CLI::Validator(
          [](std::string& topic) -> std::string {
            return topic.empty() ? "the topic is empty (fix: `ppctl help` without a topic lists every field)" : "";
          },
          "TOPIC"));
  help->add_flag("--markdown", options.markdown,
                 "Print the whole field reference as Markdown (what docs/spec-reference.md holds)")
      ->excludes(help->get_option("topic"));
  return help;
}

int run_help(const HelpOptions& options) {
  try {
    std::cout << (options.markdown ? config::spec_reference_markdown() : config::spec_help(options.topic));
  } catch (const ConfigError& e) {  // no such field: said plainly (no spec was read, nothing to start)
    std::cerr << "error: " << e.what() << '\n';
    return kExitBadInput;
  }
  return 0;
}

}  // namespace ppctl::app
