// Test helper: prints a token source as ppctl reads it, as JSON on stdout, for reference_test.py.
// Usage: ppctl_token_dump megatron PREFIX | ppctl_token_dump tokens FILE DTYPE
// Output: {"tokens": T, "documents": D, "ids": [...]} plus, for megatron, "sequence_lengths" and
// "document_index". Exit 2 with the error on stderr when the source cannot be opened.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/flat_token_source.hpp"
#include "data/megatron_source.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    nlohmann::json out;
    std::unique_ptr<ppctl::data::TokenSource> source;
    if (args.size() == 2 && args[0] == "megatron") {
      auto megatron = std::make_unique<ppctl::data::MegatronSource>(args[1]);
      megatron->check_index();
      std::vector<int64_t> lengths, documents;
      for (uint64_t k = 0; k < megatron->header().sequence_count; ++k) {
        lengths.push_back(megatron->sequence_length(static_cast<int64_t>(k)));
      }
      for (uint64_t k = 0; k < megatron->header().document_count; ++k) {
        documents.push_back(megatron->document_index(static_cast<int64_t>(k)));
      }
      out["sequence_lengths"] = lengths;
      out["document_index"] = documents;
      source = std::move(megatron);
    } else if (args.size() == 3 && args[0] == "tokens") {
      const auto dtype = args[2] == "uint16"   ? ppctl::config::TokenDType::Uint16
                         : args[2] == "uint32" ? ppctl::config::TokenDType::Uint32
                                               : ppctl::config::TokenDType::Int32;
      source = std::make_unique<ppctl::data::FlatTokenSource>(args[1], dtype);
    } else {
      std::cerr << "usage: ppctl_token_dump megatron PREFIX | ppctl_token_dump tokens FILE uint16|uint32|int32\n";
      return 2;
    }
    std::vector<int64_t> ids(static_cast<size_t>(source->num_tokens()));
    source->read(0, source->num_tokens(), ids.data());
    out["tokens"] = source->num_tokens();
    out["documents"] = source->num_documents();
    out["ids"] = ids;
    std::cout << out.dump() << '\n';
  } catch (const ppctl::Error& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
