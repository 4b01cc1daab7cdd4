// Pipeline timelines as SVG (timeline_svg.hpp): from the simulator or from a run's merged trace.
#include "observe/timeline_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace ppctl::observe {
namespace {

using nlohmann::json;

constexpr double kMinLabelWidth = 120;  // rank names, left of the plot (wider for longer names)
constexpr double kCharWidth = 6.5;      // of an 11 px sans-serif character, about
constexpr double kPlotWidth = 880;
constexpr double kBubbleWidth = 110;  // "bubble 23 %", right of the plot
constexpr double kRowHeight = 24;
constexpr double kReductionHeight = 5;  // the strip of a rank's gradient reductions, under its row
constexpr double kRowGap = 8;
constexpr double kTop = 40;  // title and axis labels above the rows

/// Text fit for an SVG text node or attribute.
std::string xml(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* fill_of(const TimelineSlice& slice) {
  if (slice.reduction) return "#b07aa1";
  switch (slice.action.kind) {
    case schedule::ActionKind::F: return "#4e79a7";
    case schedule::ActionKind::B: return "#59a14f";
    case schedule::ActionKind::I: return "#76b7b2";
    case schedule::ActionKind::W: return "#f28e2b";
    default: return "#bab0ac";
  }
}

/// A round step for an axis of `span` ms with about 8 ticks: 1, 2 or 5 times a power of ten.
double tick_step(double span) {
  if (!(span > 0)) return 1;
  const double raw = span / 8;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

}  // namespace

Timeline planned_timeline(const schedule::Simulation& simulation, std::string title) {
  Timeline timeline;
  timeline.title = std::move(title);
  timeline.step_ms = simulation.step_time;
  for (std::size_t rank = 0; rank < simulation.timeline.size(); ++rank) {
    timeline.rank_names.push_back(fmt::format("rank {}", rank));
    auto& row = timeline.slices.emplace_back();
    for (const auto& timed : simulation.timeline[rank]) row.push_back({timed.action, false, timed.start, timed.end});
    if (rank < simulation.reductions.size()) {
      for (const auto& r : simulation.reductions[rank]) {
        if (r.end > r.start) row.push_back({{schedule::ActionKind::REDUCE_GRAD, r.stage, 0}, true, r.start, r.end});
      }
    }
  }
  return timeline;
}

Timeline measured_timeline(const std::string& trace_json, const std::string& source, std::optional<int64_t> step,
                           std::string title) {
  const json trace = json::parse(trace_json, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) {
    throw PlanError(fmt::format("{}: not valid JSON, truncated or corrupt (fix: let the run finish merging its "
                                "trace, or train again with observe.trace_steps > 0)",
                                source));
  }
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    throw PlanError(fmt::format("{}: not a ppctl trace (no traceEvents list; fix: give the run directory of a "
                                "`ppctl train` with observe.trace_steps > 0)",
                                source));
  }
  // Per step, per rank: the compute slices and reductions, times in ms from the trace's origin.
  std::map<int64_t, std::map<int64_t, std::vector<TimelineSlice>>> by_step;
  std::map<int64_t, std::string> names;  // tid -> the track's name
  std::set<int64_t> tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const int64_t tid = e.contains("tid") && e["tid"].is_number_integer() ? e["tid"].get<int64_t>() : -1;
    if (ph == "M" && e.value("name", "") == "thread_name" && e.contains("args") && e["args"].is_object())
      names[tid] = e["args"].value("name", "");
    if (ph != "X" || !e.contains("args") || !e["args"].is_object() || !e["args"].contains("step")) continue;
    const std::string cat = e.value("cat", "");
    const bool reduction = cat == "reduce";
    if (!reduction && cat != "F" && cat != "B" && cat != "I" && cat != "W") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) continue;
    const auto& args = e["args"];
    schedule::Action action;
    action.kind = reduction ? schedule::ActionKind::REDUCE_GRAD : schedule::parse_action("0" + cat + "0").kind;
    action.stage = args.value("stage", int64_t{0});
    action.microbatch = args.value("microbatch", int64_t{0});
    const double start = e["ts"].get<double>() / 1000.0;
    by_step[args["step"].get<int64_t>()][tid].push_back(
        {action, reduction, start, start + e["dur"].get<double>() / 1000.0});
    tracks.insert(tid);
  }
  if (by_step.empty()) {
    throw PlanError(fmt::format("{}: no traced F, B, I or W slices (fix: train with observe.trace_steps > 0 and give "
                                "that run directory)",
                                source));
  }
  // The compute tracks: those with F/B/I/W slices; reductions sit on tracks numbered after them.
  std::set<int64_t> compute_tracks;
  for (const auto& [s, ranks] : by_step)
    for (const auto& [tid, slices] : ranks)
      if (std::any_of(slices.begin(), slices.end(), [](const TimelineSlice& x) { return !x.reduction; }))
        compute_tracks.insert(tid);
  const auto ranks = static_cast<int64_t>(compute_tracks.size());
  const auto complete = [&](int64_t s) {
    int64_t seen = 0;
    for (const int64_t tid : compute_tracks) seen += by_step[s].count(tid) > 0;
    return seen == ranks;
  };
  if (!step) {
    for (auto it = by_step.rbegin(); it != by_step.rend() && !step; ++it)
      if (complete(it->first)) step = it->first;
    if (!step) step = by_step.rbegin()->first;
  }
  if (by_step.count(*step) == 0) {
    std::vector<std::string> held;
    for (const auto& [s, unused] : by_step) held.push_back(std::to_string(s));
    throw PlanError(fmt::format("{}: step {} is not traced (the trace holds steps {}; fix: give one of them, or "
                                "train with a larger observe.trace_steps)",
                                source, *step, fmt::join(held, ", ")));
  }
  Timeline timeline;
  timeline.title = std::move(title);
  timeline.step = *step;
  double origin = INFINITY, end = -INFINITY;
  for (const auto& [tid, slices] : by_step[*step])
    for (const auto& x : slices) {
      origin = std::min(origin, x.start_ms);
      end = std::max(end, x.end_ms);
    }
  timeline.step_ms = end - origin;
  for (const int64_t tid : compute_tracks) {
    timeline.rank_names.push_back(names.count(tid) ? names[tid] : fmt::format("rank {}", tid));
    auto& row = timeline.slices.emplace_back();
    for (const int64_t t : {tid, tid + ranks}) {  // the rank's track, then its collectives track
      for (auto x : by_step[*step][t]) {
        if (t != tid && !x.reduction) continue;
        x.start_ms -= origin;
        x.end_ms -= origin;
        row.push_back(x);
      }
    }
  }
  return timeline;
}

std::string timeline_svg(const Timeline& timeline) {
  double label_width = kMinLabelWidth;
  for (const auto& name : timeline.rank_names)
    label_width = std::max(label_width, 16 + kCharWidth * static_cast<double>(name.size()));
  const double span = timeline.step_ms > 0 ? timeline.step_ms : 1.0;
  const double scale = kPlotWidth / span;
  std::vector<double> row_top;
  double y = kTop;
  for (const auto& row : timeline.slices) {
    row_top.push_back(y);
    const bool reductions = std::any_of(row.begin(), row.end(), [](const TimelineSlice& s) { return s.reduction; });
    y += kRowHeight + (reductions ? kReductionHeight + 2 : 0) + kRowGap;
  }
  const double axis_y = y;
  const double height = axis_y + 76;
  const double width = label_width + kPlotWidth + kBubbleWidth;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2:.0f}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{3}</text>\n",
      width, height, label_width, xml(timeline.title));
  bool several_stages = false;  // some rank holds more than one stage: its later ones are drawn lighter
  for (std::size_t r = 0; r < timeline.slices.size(); ++r) {
    const auto& row = timeline.slices[r];
    const double top = row_top[r];
    std::set<int64_t> stages;
    double busy = 0;
    for (const auto& s : row) {
      if (s.reduction) continue;
      stages.insert(s.action.stage);
      busy += s.end_ms - s.start_ms;
    }
    several_stages = several_stages || stages.size() > 1;
    const std::string name = r < timeline.rank_names.size() ? timeline.rank_names[r] : fmt::format("rank {}", r);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", label_width - 8,
                       top + kRowHeight / 2 + 4, xml(name));
    // The row's frame: what no box covers is idle time, the bubble.
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#f4f4f4\" "
                       "stroke=\"#cccccc\"/>\n",
                       label_width, top, kPlotWidth, kRowHeight);
    for (const auto& s : row) {
      const double x = label_width + s.start_ms * scale;
      const double w = std::max(0.5, (s.end_ms - s.start_ms) * scale);
      const double box_top = s.reduction ? top + kRowHeight + 2 : top;
      const double box_height = s.reduction ? kReductionHeight : kRowHeight;
      // With several stages on a rank (interleaved, zbv) its later chunks are drawn lighter.
      const auto chunk = std::distance(stages.begin(), stages.find(s.action.stage));
      const char* opacity = !s.reduction && chunk > 0 ? " fill-opacity=\"0.6\"" : "";
      const std::string tip = s.reduction ? fmt::format("stage {} gradient reduction", s.action.stage)
                                          : schedule::to_string(s.action);
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"{} "
                         "stroke=\"white\" stroke-width=\"0.5\"><title>{} {:.3f}-{:.3f} ms</title></rect>\n",
                         x, box_top, w, box_height, fill_of(s), opacity, xml(tip), s.start_ms, s.end_ms);
      if (!s.reduction && w >= 12) {
        svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"white\" "
                           "font-size=\"10\">{}</text>\n",
                           x + w / 2, top + kRowHeight / 2 + 4, s.action.microbatch);
      }
    }
    const double bubble = std::clamp(1.0 - busy / span, 0.0, 1.0);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\">bubble {:.0f} %</text>\n", label_width + kPlotWidth + 8,
                       top + kRowHeight / 2 + 4, 100 * bubble);
  }
  // Time axis.
  const double step = tick_step(span);
  svg += fmt::format("<line x1=\"{0:.0f}\" y1=\"{1:.1f}\" x2=\"{2:.0f}\" y2=\"{1:.1f}\" stroke=\"#333333\"/>\n",
                     label_width, axis_y, label_width + kPlotWidth);
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    const double x = label_width + t * scale;
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"#333333\"/>"
                       "<text x=\"{0:.2f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:g}</text>\n",
                       x, axis_y, axis_y + 4, axis_y + 16, t);
  }
  svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\">ms</text>\n", label_width + kPlotWidth + 8, axis_y + 16);
  // Legend.
  double lx = label_width;
  const double ly = axis_y + 34;
  for (const auto& [fill, label] : std::vector<std::pair<const char*, const char*>>{
           {"#4e79a7", "F forward"}, {"#59a14f", "B backward"}, {"#76b7b2", "I input gradient"},
           {"#f28e2b", "W weight gradient"}, {"#b07aa1", "gradient reduction"}, {"#f4f4f4", "idle (bubble)"}}) {
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" height=\"12\" fill=\"{}\" stroke=\"#cccccc\"/>"
                       "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
                       lx, ly - 10, fill, lx + 16, ly, label);
    lx += 140;
  }
  if (several_stages) {
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">lighter boxes: a rank's later stages (virtual stages), same "
                       "kind</text>\n",
                       label_width, ly + 18);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ppctl::observe
