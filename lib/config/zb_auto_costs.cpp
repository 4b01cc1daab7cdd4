// The reader of pipeline.zb_auto: zb-auto's costs, per stage or for every stage, checked key by key.
#include "config/zb_auto_costs.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "config/suggest.hpp"

namespace ppctl::config::detail {
namespace {

/// A cost in ms: [0, 1e9] (1e9 ms is about 11.6 days, beyond any one action).
const RealRange kMs{0, false, 1e9, false};

/// Reads a number or a non-empty list of numbers, each in kMs, into `out`.
bool read_costs(Context& c, const Entry& e, std::vector<double>& out) {
  if (e.value.IsSequence()) {
    if (e.value.size() == 0) {
      c.bad(e, "must be a number (every stage) or a non-empty list of numbers (one per stage), in ms",
            "write e.g. 1.5, or [1.5, 1.2] for two stages");
      return false;
    }
    std::vector<double> values(e.value.size(), 0.0);
    bool ok = true;
    for (std::size_t k = 0; k < e.value.size(); ++k) {
      const Entry item{fmt::format("{}[{}]", e.path, k), line_of(e.value[k]), e.value[k]};
      ok = read_real(c, item, kMs, 1.0, values[k]) && ok;
    }
    if (ok) out = std::move(values);
    return ok;
  }
  double value = 0.0;
  if (!read_real(c, e, kMs, 1.0, value)) return false;
  out = {value};
  return true;
}

}  // namespace

bool read_zb_auto(Context& c, const Entry& e, ZbAutoSpec& out) {
  if (!e.value.IsMap()) {
    c.bad(e, "must be a mapping of zb-auto's costs in ms",
          "write e.g. zb_auto: {f: 1, i: 1, w: 1, b: 1.5, defer_penalty: 0.2} (see docs/schedules.md, zb-auto)");
    return false;
  }
  ZbAutoSpec z = out;
  const std::map<std::string, std::vector<double>*> lists{
      {"f", &z.forward}, {"i", &z.input_grad}, {"w", &z.weight_grad}, {"b", &z.backward},
      {"defer_penalty", &z.defer_penalty}};
  const std::vector<std::string> keys{"f", "i", "w", "b", "defer_penalty", "p2p_latency", "max_in_flight"};
  bool ok = true;
  for (const auto& item : e.value) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    const Entry entry{e.path + "." + key, line_of(item.second), item.second};
    if (item.second.IsNull()) continue;
    if (const auto it = lists.find(key); it != lists.end()) {
      ok = read_costs(c, entry, *it->second) && ok;
    } else if (key == "p2p_latency") {
      ok = read_real(c, entry, kMs, 0.0, z.p2p_latency) && ok;
    } else if (key == "max_in_flight") {
      ok = read_int(c, entry, {0, 1'000'000, "0 means pipeline.stages"}, 0, z.max_in_flight) && ok;
    } else {
      c.problems.add(line_of(item.first), e.path + "." + key, std::nullopt,
                     "unknown key: zb-auto takes " + join_names(keys), did_you_mean(key, keys));
      ok = false;
    }
  }
  if (ok) out = std::move(z);
  return ok;
}

}  // namespace ppctl::config::detail
