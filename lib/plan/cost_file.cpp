// Reading and validating a per-layer costs file (JSON).
#include "plan/cost_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "config/suggest.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"

namespace ppctl::plan {
namespace {

using nlohmann::json;

const std::vector<std::string> kTopKeys{"block", "blocks", "embedding", "head", "micro_batch_size"};
const std::vector<std::string> kPieceKeys{"forward_ms", "backward_ms"};
constexpr const char* kExample = R"({"forward_ms": 0.8, "backward_ms": 1.6})";

/// Collects every problem of one file, each naming the file and the field.
class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  void bad(const std::string& field, const std::string& what, const std::string& fix) {
    problems_.push_back(fmt::format("{}: {}: {} (fix: {})", source_, field, what, fix));
  }

  static std::string shown(const json& value) { return core::echo_value(value.dump()); }

  /// Unknown keys of `object` (did-you-mean against `known`).
  void keys(const json& object, const std::string& prefix, const std::vector<std::string>& known) {
    for (const auto& [key, value] : object.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        bad(prefix + key, "unknown key", config::did_you_mean(key, known) + "; the keys are " + config::join_names(known));
      }
    }
  }

  /// One piece {"forward_ms": F, "backward_ms": B} at `field`.
  PieceTime piece(const json& value, const std::string& field) {
    PieceTime out;
    if (!value.is_object()) {
      bad(field, fmt::format("value {}: must be an object of forward_ms and backward_ms", shown(value)),
          fmt::format("write {}: {}", field, kExample));
      return out;
    }
    keys(value, field + ".", kPieceKeys);
    out.forward_ms = time(value, field, "forward_ms");
    out.backward_ms = time(value, field, "backward_ms");
    return out;
  }

  size_t count() const { return problems_.size(); }

  /// A block at `field`: a piece whose forward + backward is above 0.
  PieceTime block(const json& value, const std::string& field) {
    const size_t before = count();
    const PieceTime out = piece(value, field);
    if (count() == before && out.total() <= 0) {
      bad(field, "forward_ms + backward_ms is 0: a block must take some time", "write the measured times");
    }
    return out;
  }

  void throw_if_any() const {
    if (problems_.empty()) return;
    std::string all;
    for (const auto& p : problems_) all += (all.empty() ? "" : "\n") + p;
    throw PlanError(all);
  }

 private:
  double time(const json& piece, const std::string& field, const std::string& key) {
    const std::string path = field + "." + key;
    const auto it = piece.find(key);
    if (it == piece.end()) {
      bad(path, "missing", fmt::format("add \"{}\": the time in ms per microbatch (0 when negligible)", key));
      return 0.0;
    }
    if (!it->is_number()) {
      bad(path, fmt::format("value {}: must be a number (ms per microbatch)", shown(*it)),
          "write a number such as 0.8");
      return 0.0;
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < 0) {
      bad(path, fmt::format("value {}: must be finite and >= 0 (ms per microbatch)", shown(*it)),
          "write the measured time, 0 or more");
      return 0.0;
    }
    return v;
  }

  std::string source_;
  std::vector<std::string> problems_;
};

}  // namespace

LayerTimes parse_cost_file(const std::string& text, const std::string& source, int64_t layers) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number beyond double (1e999)
    throw PlanError(fmt::format("{}: not JSON: {} (fix: write an object such as {{\"block\": {}, \"embedding\": "
                                "..., \"head\": ...}})",
                                source, e.what(), kExample));
  }
  Checker check(source);
  if (!root.is_object()) {
    check.bad("(top level)", fmt::format("value {}: must be an object with block (or blocks), embedding and head",
                                         Checker::shown(root)),
              fmt::format("write {{\"block\": {}, \"embedding\": ..., \"head\": ...}}", kExample));
    check.throw_if_any();
  }
  check.keys(root, "", kTopKeys);
  LayerTimes out;
  const bool one = root.contains("block");
  const bool each = root.contains("blocks");
  if (one == each) {
    check.bad("block", one ? "given together with blocks" : "missing (and no blocks)",
              one ? "give block (one time for every block) or blocks (one per block), not both"
                  : fmt::format("add \"block\": {} (every block), or \"blocks\": [...] with {} entries", kExample,
                                layers));
  } else if (one) {
    out.blocks.assign(static_cast<size_t>(layers), check.block(root.at("block"), "block"));
  } else {
    const json& list = root.at("blocks");
    if (!list.is_array() || static_cast<int64_t>(list.size()) != layers) {
      check.bad("blocks",
                list.is_array() ? fmt::format("{} entries, but model.layers is {}", list.size(), layers)
                                : fmt::format("value {}: must be a list of {} objects", Checker::shown(list), layers),
                fmt::format("give one {} per block, {} in all, or one \"block\" for every block", kExample, layers));
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        out.blocks.push_back(check.block(list[i], fmt::format("blocks[{}]", i)));
      }
    }
  }
  for (const auto& [key, target] : {std::pair{"embedding", &out.embedding}, std::pair{"head", &out.head}}) {
    if (!root.contains(key)) {
      check.bad(key, "missing", fmt::format("add \"{}\": {} (zeros when negligible)", key, kExample));
    } else {
      *target = check.piece(root.at(key), key);
    }
  }
  if (root.contains("micro_batch_size")) {
    const json& mbs = root.at("micro_batch_size");
    if (!mbs.is_number_integer() || mbs.get<int64_t>() < 1) {
      check.bad("micro_batch_size", fmt::format("value {}: must be a whole number >= 1", Checker::shown(mbs)),
                "write the pipeline.micro_batch_size the times were measured at, e.g. \"micro_batch_size\": 4");
    } else {
      out.micro_batch_size = mbs.get<int64_t>();
    }
  }
  check.throw_if_any();
  return out;
}

LayerTimes read_cost_file(const std::string& path, int64_t layers) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    throw PlanError(fmt::format("{}: cannot be read (fix: give a readable costs file, or a previous run's run "
                                "directory)",
                                path));
  }
  return parse_cost_file(text.str(), path, layers);
}

}  // namespace ppctl::plan
