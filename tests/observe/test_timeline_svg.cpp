// Tests for observe/timeline_svg: a simulated or traced step drawn as SVG holds one box per action at its time,
// each rank's bubble as the simulator computes it, and a measured step chosen and refused as documented.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "core/error.hpp"
#include "observe/timeline_svg.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace ppctl;

namespace {

/// Every match of `pattern` in `text`.
std::vector<std::smatch> matches(const std::string& text, const std::regex& pattern) {
  std::vector<std::smatch> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it)
    out.push_back(*it);
  return out;
}

/// The message `f` throws as a ppctl::PlanError; "" when it does not.
template <typename F>
std::string plan_error(F f) {
  try {
    f();
  } catch (const PlanError& e) {
    return e.what();
  }
  return "";
}

/// A merged trace (trace_merge.hpp's layout) of `ranks` ranks: step s of rank r has an F of microbatch 0 from
/// 100 s + 10 r ms lasting 5 ms, and a B after it; `skip` leaves rank 1's slices of that step out.
std::string synthetic_trace(int ranks, int steps, int skip_step = 0) {
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", r},
                      {"args", {{"name", fmt::format("rank {}", r)}}}});
  for (int s = 1; s <= steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      if (s == skip_step && r == 1) continue;
      const double t0 = 1000.0 * (100 * s + 10 * r);  // microseconds
      events.push_back({{"ph", "X"}, {"cat", "step"}, {"name", fmt::format("step {}", s)}, {"tid", r}, {"ts", t0},
                        {"dur", 30000.0}, {"args", {{"step", s}}}});
      events.push_back({{"ph", "X"}, {"cat", "F"}, {"name", fmt::format("{}F0", r)}, {"tid", r}, {"ts", t0},
                        {"dur", 5000.0}, {"args", {{"step", s}, {"stage", r}, {"microbatch", 0}}}});
      events.push_back({{"ph", "X"}, {"cat", "B"}, {"name", fmt::format("{}B0", r)}, {"tid", r}, {"ts", t0 + 8000},
                        {"dur", 10000.0}, {"args", {{"step", s}, {"stage", r}, {"microbatch", 0}}}});
      events.push_back({{"ph", "X"}, {"cat", "send"}, {"name", fmt::format("{}SEND_F0", r)}, {"tid", r},
                        {"ts", t0 + 5000}, {"dur", 100.0}, {"args", {{"step", s}, {"stage", r}, {"microbatch", 0}}}});
    }
  }
  return nlohmann::json{{"traceEvents", events}}.dump();
}

}  // namespace

TEST_CASE("a simulated step is drawn box for box, with each rank's bubble", "[timeline_svg]") {
  const auto [kind, v] =
      GENERATE(std::pair{config::ScheduleKind::OneFOneB, 1}, std::pair{config::ScheduleKind::ZBH1, 1},
               std::pair{config::ScheduleKind::ZBV, 2}, std::pair{config::ScheduleKind::Interleaved1F1B, 2});
  schedule::ScheduleParams params;
  params.kind = kind;
  params.ranks = 4;
  params.virtual_stages = v;
  params.microbatches = 8;
  const auto program = schedule::generate(params);
  schedule::CostModel costs;
  costs.grad_reduce = 0.5;
  const auto simulation = schedule::simulate(program, costs);
  const auto svg = observe::timeline_svg(observe::planned_timeline(simulation, "job <a&b>"));
  INFO(config::to_string(kind));
  CHECK_THAT(svg, ContainsSubstring("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(svg, ContainsSubstring("job &lt;a&amp;b&gt;"));  // the title escaped
  // One box per compute action, its tooltip the action and its simulated times.
  std::size_t actions = 0;
  for (std::size_t r = 0; r < simulation.timeline.size(); ++r) {
    for (const auto& timed : simulation.timeline[r]) {
      ++actions;
      CHECK_THAT(svg, ContainsSubstring(fmt::format("<title>{} {:.3f}-{:.3f} ms</title>",
                                                    schedule::to_string(timed.action), timed.start, timed.end)));
    }
  }
  const auto boxes = matches(svg, std::regex("<title>[0-9]+[FBIW][0-9]+ "));
  CHECK(boxes.size() == actions);
  CHECK(matches(svg, std::regex("gradient reduction [0-9.]+-")).size() == program.num_stages);
  // Each row's idle share is the simulator's bubble fraction.
  const auto bubbles = matches(svg, std::regex("bubble ([0-9]+) %"));
  REQUIRE(bubbles.size() == simulation.bubble_fraction.size());
  for (std::size_t r = 0; r < bubbles.size(); ++r)
    CHECK(std::stoi(bubbles[r][1]) == static_cast<int>(std::lround(100 * simulation.bubble_fraction[r])));
  // A rank holding several stages draws its later ones lighter, and the legend says so.
  CHECK((svg.find("lighter boxes: a rank's later stages") != std::string::npos) == (v > 1));
  // Same timeline, same bytes.
  CHECK(svg == observe::timeline_svg(observe::planned_timeline(simulation, "job <a&b>")));
}

TEST_CASE("a measured step: the last complete one by default, times from its start", "[timeline_svg]") {
  // Step 3 lacks rank 1's slices (it failed or the trace was cut): step 2 is drawn.
  const auto timeline = observe::measured_timeline(synthetic_trace(2, 3, 3), "run/trace.json", std::nullopt, "t");
  CHECK(timeline.step == 2);
  REQUIRE(timeline.slices.size() == 2);
  CHECK(timeline.rank_names == std::vector<std::string>{"rank 0", "rank 1"});
  for (int r = 0; r < 2; ++r) {
    REQUIRE(timeline.slices[r].size() == 2);  // F and B; the SEND's post is no compute
    CHECK(timeline.slices[r][0].action.kind == schedule::ActionKind::F);
    CHECK(timeline.slices[r][0].start_ms == 10.0 * r);
    CHECK(timeline.slices[r][1].action.kind == schedule::ActionKind::B);
    CHECK(timeline.slices[r][1].end_ms == 10.0 * r + 18);
  }
  CHECK(timeline.step_ms == 28.0);
  const auto first = observe::measured_timeline(synthetic_trace(2, 3), "run/trace.json", 1, "t");
  CHECK(first.step == 1);
  CHECK(observe::measured_timeline(synthetic_trace(2, 3), "run/trace.json", std::nullopt, "t").step == 3);
}

TEST_CASE("a measured step that is not there, or a file that is no trace, is refused naming it", "[timeline_svg]") {
  CHECK_THAT(plan_error([] { observe::measured_timeline(synthetic_trace(2, 3), "run/trace.json", 7, "t"); }),
             ContainsSubstring("run/trace.json: step 7 is not traced (the trace holds steps 1, 2, 3;"));
  // Cut or corrupt JSON (a run killed while it wrote, a truncated copy) is named as such.
  const std::string whole = synthetic_trace(2, 3);
  for (const std::string text : {std::string("not json"), whole.substr(0, whole.size() / 2)}) {
    CHECK_THAT(plan_error([&] { observe::measured_timeline(text, "x.json", std::nullopt, "t"); }),
               ContainsSubstring("x.json: not valid JSON, truncated or corrupt"));
  }
  for (const std::string text : {"[1, 2]", "{\"traceEvents\": 3}"}) {
    INFO(text);
    CHECK_THAT(plan_error([&] { observe::measured_timeline(text, "x.json", std::nullopt, "t"); }),
               ContainsSubstring("x.json: not a ppctl trace"));
  }
  CHECK_THAT(plan_error([] { observe::measured_timeline("{\"traceEvents\": []}", "x.json", std::nullopt, "t"); }),
             ContainsSubstring("x.json: no traced F, B, I or W slices"));
}

TEST_CASE("long rank names widen the label column instead of being cut", "[timeline_svg]") {
  schedule::ScheduleParams params;
  params.ranks = 2;
  params.microbatches = 2;
  auto timeline = observe::planned_timeline(schedule::simulate(schedule::generate(params), {}), "t");
  const auto narrow = observe::timeline_svg(timeline);
  timeline.rank_names = {"rank 0 (pipeline rank 0 of replica 0)", "rank 2 (pipeline rank 1 of replica 0)"};
  const auto wide = observe::timeline_svg(timeline);
  // The label is right-aligned at the plot's left edge minus 8: that x must leave room for the whole name.
  const std::regex label("<text x=\"([0-9]+)\" y=\"[0-9.]+\" text-anchor=\"end\">rank 2 \\(pipeline");
  std::smatch m;
  REQUIRE(std::regex_search(wide, m, label));
  CHECK(std::stod(m[1]) >= 6.0 * timeline.rank_names[1].size());
  CHECK(narrow.find("<text x=\"112\"") != std::string::npos);  // the default column: 120 - 8
}
