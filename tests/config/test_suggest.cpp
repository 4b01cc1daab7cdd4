// Tests for config/suggest: edit distance and closest_match, behind the loader's "did you mean" hints.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "config/suggest.hpp"

using namespace ppctl::config;

TEST_CASE("edit distance counts edits and adjacent swaps, ignoring case", "[config][suggest]") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("hidden", "hiden") == 1);
  CHECK(edit_distance("heads", "haeds") == 1);
  CHECK(edit_distance("GPipe", "gpipe") == 0);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("closest_match accepts near misses and prefixes only", "[config][suggest]") {
  const std::vector<std::string> keys{"vocab_size", "layers", "hidden", "heads", "seq_len", "dropout"};
  CHECK(closest_match("hiden", keys).value_or("") == "hidden");
  CHECK(closest_match("seqlen", keys).value_or("") == "seq_len");
  CHECK(closest_match("vocab", keys).value_or("") == "vocab_size");
  CHECK_FALSE(closest_match("colour", keys).has_value());
  CHECK_FALSE(closest_match("xy", std::vector<std::string>{"lr"}).has_value());
  CHECK(did_you_mean("colour", keys) == "use one of vocab_size, layers, hidden, heads, seq_len, dropout");
  CHECK(did_you_mean("layer", keys) == "did you mean 'layers'?");
}
