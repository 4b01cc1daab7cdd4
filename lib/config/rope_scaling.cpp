// The reader of model.rope_scaling: transformers' rope_parameters keys, each type's own, checked.
#include "config/rope_scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace ppctl::config::detail {
namespace {

/// The keys each RoPE type takes besides rope_type, required ones first (modeling_rope_utils'
/// _validate_*_rope_parameters).
struct TypeKeys {
  RopeType type;
  std::vector<std::string> required;
  std::vector<std::string> optional;
};

const std::vector<TypeKeys>& type_keys() {
  static const std::vector<TypeKeys> keys{
      {RopeType::Default, {}, {}},
      {RopeType::Linear, {"factor"}, {}},
      {RopeType::Llama3, {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, {}},
      {RopeType::Yarn,
       {"factor", "original_max_position_embeddings"},
       {"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"}},
  };
  return keys;
}

/// `model.rope_scaling.KEY`, or for a label `model.rope_scaling (from FILE rope_scaling)` the label
/// with KEY added on both sides: `model.rope_scaling.KEY (from FILE rope_scaling.KEY)`.
std::string key_path(const std::string& path, const std::string& key) {
  const auto from = path.find(" (from ");
  if (from == std::string::npos || path.back() != ')') return path + "." + key;
  return path.substr(0, from) + "." + key + path.substr(from, path.size() - from - 1) + "." + key + ")";
}

}  // namespace

bool read_rope_scaling(Context& c, const Entry& e, RopeScaling& out) {
  const std::string example =
      "write e.g. rope_scaling: {rope_type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, "
      "original_max_position_embeddings: 8192}";
  if (!e.value.IsMap()) {
    c.bad(e, "must be a mapping of RoPE scaling parameters, as transformers' rope_parameters", example);
    return false;
  }
  std::map<std::string, Entry> given;  // by key, nulls left out
  for (const auto& item : e.value) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    if (item.second.IsNull()) continue;
    given.emplace(key == "type" && !e.value["rope_type"] ? "rope_type" : key,
                  Entry{key_path(e.path, key), line_of(item.second), item.second});
  }
  RopeScaling r;
  bool ok = true;
  if (const auto it = given.find("rope_type"); it != given.end()) {
    const std::vector<RopeType> types{RopeType::Default, RopeType::Linear, RopeType::Llama3, RopeType::Yarn};
    if (!read_enum(c, it->second, types, {{"dynamic", "yarn"}, {"ntk", "yarn"}, {"longrope", "yarn"}}, r.rope_type)) {
      return false;
    }
  } else if (!given.empty()) {
    c.bad(e, "names no rope_type", "add rope_type: default, linear, llama3 or yarn");
    return false;
  }
  const auto& keys = *std::find_if(type_keys().begin(), type_keys().end(),
                                   [&](const TypeKeys& k) { return k.type == r.rope_type; });
  const auto takes = [&](const std::string& key) {
    return std::count(keys.required.begin(), keys.required.end(), key) +
               std::count(keys.optional.begin(), keys.optional.end(), key) > 0;
  };
  std::vector<std::string> all = keys.required;
  all.insert(all.end(), keys.optional.begin(), keys.optional.end());
  for (const auto& key : keys.required) {
    if (!given.count(key)) {
      c.bad(e, fmt::format("rope_type {} needs {}", to_string(r.rope_type), key),
            fmt::format("add {} ({} takes {})", key, to_string(r.rope_type), join_names(all)));
      ok = false;
    }
  }
  for (auto& [key, entry] : given) {
    if (key == "rope_type") continue;
    if (key == "partial_rotary_factor") {
      double partial = 1.0;
      if (read_real(c, entry, {1, false, 1, false}, 1.0, partial)) continue;
      ok = false;
      continue;
    }
    if (!takes(key)) {
      const std::string why = key == "rope_theta" ? "model.rope_theta holds the base"
                              : all.empty()       ? "it takes none"
                                                  : "it takes " + join_names(all);
      c.bad(entry, fmt::format("is not a parameter of rope_type {} ({})", to_string(r.rope_type), why),
            key == "rope_theta" ? "write it as model.rope_theta" : "remove it");
      ok = false;
      continue;
    }
    if (key == "truncate") {
      if (entry.value.IsScalar() && (entry.value.Scalar() == "true" || entry.value.Scalar() == "false")) {
        r.truncate = entry.value.Scalar() == "true";
      } else {
        c.bad(entry, "must be true or false", "write true or false");
        ok = false;
      }
      continue;
    }
    if (key == "original_max_position_embeddings") {
      ok = read_int(c, entry, {1, 1'000'000'000}, 8192, r.original_max_position_embeddings) && ok;
      continue;
    }
    const double any = 1e12;
    const std::map<std::string, std::pair<double*, RealRange>> reals{
        {"factor", {&r.factor, {1, false, any, false}}},
        {"low_freq_factor", {&r.low_freq_factor, {0, true, any, false}}},
        {"high_freq_factor", {&r.high_freq_factor, {0, true, any, false}}},
        {"attention_factor", {&r.attention_factor, {0, true, any, false}}},
        {"beta_fast", {&r.beta_fast, {0, true, any, false}}},
        {"beta_slow", {&r.beta_slow, {0, true, any, false}}},
        {"mscale", {&r.mscale, {-any, false, any, false}}},
        {"mscale_all_dim", {&r.mscale_all_dim, {-any, false, any, false}}},
    };
    const auto& [slot, range] = reals.at(key);
    ok = read_real(c, entry, range, *slot, *slot) && ok;
  }
  if (ok && r.rope_type == RopeType::Llama3 && r.high_freq_factor <= r.low_freq_factor) {
    c.bad(given.at("high_freq_factor"),
          fmt::format("must exceed low_freq_factor ({:g}): the blended band lies between the two wavelengths",
                      r.low_freq_factor),
          "Llama 3.1 uses low_freq_factor 1 and high_freq_factor 4");
    ok = false;
  }
  if (ok) out = r;
  return ok;
}

}  // namespace ppctl::config::detail
