// Tests of custom schedules as CSV: round trips of every generated schedule, errors naming row and
// column, broken schedules that load but fail validate(), and the program hash.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/csv.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"
#include "support/errors.hpp"
#include "support/readme.hpp"
#include "support/temp_dir.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;
using config::ScheduleKind;

namespace {

/// The message parse_csv throws for `text` (fails the test if it does not throw).
std::string csv_error(const std::string& text) {
  return test::message_of<ScheduleError>([&] { parse_csv(text, "sched.csv"); },
                                         "parse_csv accepted:\n" + text);
}

/// The message validate() throws for the CSV's program with communication added.
std::string validate_error(const std::string& text) {
  const Program program = add_communication(parse_csv(text, "sched.csv"));
  return test::message_of<ScheduleError>([&] { validate(program); },
                                         "validate() accepted:\n" + format_grid(program));
}

/// A valid parameter set of each generated kind, over a small grid.
std::vector<ScheduleParams> generated_params() {
  std::vector<ScheduleParams> out;
  for (int64_t p = 1; p <= 4; ++p)
    for (int64_t m = 1; m <= 8; ++m) {
      out.push_back({ScheduleKind::GPipe, p, 1, m, 0});
      out.push_back({ScheduleKind::OneFOneB, p, 1, m, 0});
      out.push_back({ScheduleKind::ZBH1, p, 1, m, 0});
      out.push_back({ScheduleKind::ZBV, p, 2, m, 0});
      for (int64_t v : {2, 4})
        if (m <= p || m % p == 0) out.push_back({ScheduleKind::Interleaved1F1B, p, v, m, 0});
    }
  return out;
}

}  // namespace

TEST_CASE(
    "to_csv then parse_csv gives back every generated schedule's compute actions and placement") {
  for (const ScheduleParams& params : generated_params()) {
    CAPTURE(config::to_string(params.kind), params.ranks, params.virtual_stages,
            params.microbatches);
    const Program compute = generate_compute(params);
    const std::string text = to_csv(compute);
    const Program back = parse_csv(text, "roundtrip.csv");
    CHECK(back.num_stages == compute.num_stages);
    CHECK(back.num_microbatches == compute.num_microbatches);
    CHECK(back.stage_to_rank == compute.stage_to_rank);
    CHECK(back.ranks == compute.ranks);
    CHECK(program_hash(back) == program_hash(compute));
    // With communication, only the compute actions go out, and they come back.
    CHECK(to_csv(add_communication(compute)) == text);
    REQUIRE_NOTHROW(validate(add_communication(back)));
  }
}

TEST_CASE("parse_csv: one row per rank, comments, blank lines, spaces and empty cells") {
  const Program program = parse_csv(
      "# 1F1B, p = 2, m = 2\n"
      "\n"
      " 0F0, 0F1 ,0B0,,0B1,\r\n"
      "   # rank 1 follows\n"
      "1F0,1B0,1F1,1B1\n",
      "sched.csv");
  CHECK(program.num_ranks() == 2);
  CHECK(program.num_stages == 2);
  CHECK(program.num_microbatches == 2);
  CHECK(program.stage_to_rank == std::vector<int64_t>{0, 1});
  CHECK(format_rank(program.ranks[0], false) == "0F0 0F1 0B0 0B1");
  CHECK(format_rank(program.ranks[1], false) == "1F0 1B0 1F1 1B1");
  REQUIRE_NOTHROW(validate(add_communication(program)));
  CHECK(to_csv(program) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");

  // Several stages per rank in any placement (here a V), split backwards.
  const Program v = parse_csv("0F0,3F0,3I0,0I0,3W0,0W0\n1F0,2F0,2I0,1I0,1W0,2W0\n", "v.csv");
  CHECK(v.stage_to_rank == std::vector<int64_t>{0, 1, 1, 0});
  REQUIRE_NOTHROW(validate(add_communication(v)));
}

TEST_CASE("parse_csv errors name the file, line, row and column") {
  CHECK_THAT(
      csv_error("0F0,0B0\n1F0,1X0,1B0\n"),
      ContainsSubstring("sched.csv: line 2, row 2 (rank 1), column 2: invalid action \"1X0\": "
                        "unknown kind \"X\""));
  CHECK_THAT(
      csv_error("# header\n0F0, F1 ,0B0\n"),
      ContainsSubstring("sched.csv: line 2, row 1 (rank 0), column 2: invalid action \"F1\""));
  CHECK_THAT(csv_error("0F0,0SEND_F0,0B0\n1F0,1B0\n"),
             ContainsSubstring("sched.csv: line 1, row 1 (rank 0), column 2: 0SEND_F0 is a "
                               "communication action") &&
                 ContainsSubstring("ppctl adds the transfers"));
  CHECK_THAT(csv_error("0F0,0B0,0REDUCE_GRAD\n"),
             ContainsSubstring("sched.csv: line 1, row 1 (rank 0), column 3: 0REDUCE_GRAD is a "
                               "gradient reduction action") &&
                 ContainsSubstring("with runtime.overlap_grad_reduce, the gradient reductions") &&
                 ContainsSubstring("(fix: delete the cell)"));
  CHECK_THAT(
      csv_error("0F0,1F0,1B0,0B0\n\n1F1,1B1\n"),
      ContainsSubstring("sched.csv: line 3, row 2 (rank 1), column 1: 1F1 puts stage 1 on "
                        "rank 1, but sched.csv: line 1, row 1 (rank 0), column 2 already put "
                        "it on rank 0"));
  CHECK_THAT(csv_error(""), ContainsSubstring("sched.csv: the schedule is empty"));
  CHECK_THAT(csv_error("# only a comment\n\n   \n"), ContainsSubstring("the schedule is empty"));
  CHECK_THAT(csv_error("0F0,0B0\n , ,\n1F0,1B0\n"),
             ContainsSubstring("sched.csv: line 2, row 2 (rank 1) has no action"));
  CHECK_THAT(csv_error("0F0,0B0\n2F0,2B0\n"),
             ContainsSubstring("sched.csv: stage 1 has no action, but stage 2 does"));
  CHECK_THAT(csv_error("0F0,0B0,0F2,0B2\n"),
             ContainsSubstring("sched.csv: microbatch 1 has no action, but microbatch 2 does"));
}

TEST_CASE("read_csv reads a file and names it in errors") {
  const ppctl::test::TempDir dir("ppctl_csv_test_");
  const std::string path = (dir.path / "sched.csv").string();
  ppctl::test::write_checked(path, "0F0,0B0\n1F0,1Q0\n");
  CHECK_THROWS_WITH(read_csv(path), ContainsSubstring(path + ": line 2, row 2 (rank 1), column 2"));
  ppctl::test::write_checked(path, "0F0,0B0\n");
  CHECK(read_csv(path).num_stages == 1);
  std::remove(path.c_str());
  CHECK_THROWS_WITH(read_csv(path), ContainsSubstring(path + ": cannot read the schedule file"));
}

TEST_CASE("broken schedules load but validate() rejects them, with the grid") {
  // A missing backward for microbatch 1 on stage 1.
  const std::string missing = validate_error("0F0,0F1,0B0,0B1\n1F0,1B0,1F1\n");
  CHECK_THAT(missing, ContainsSubstring("(rule: each F and B exactly once): 1B1 is missing"));
  CHECK_THAT(missing, ContainsSubstring("rank 0: 0F0 0SEND_F0"));
  // A backward before its forward.
  CHECK_THAT(validate_error("0F0,0B1,0F1,0B0\n1F0,1F1,1B1,1B0\n"),
             ContainsSubstring("(rule: F before B on its rank)"));
  // A cycle between two ranks: rank 1 starts with microbatch 1, which rank 0 forwards only after
  // microbatch 0's gradient, which rank 1 computes only after microbatch 1.
  const std::string deadlock = validate_error("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  CHECK_THAT(deadlock, ContainsSubstring("(rule: no deadlock)"));
  CHECK_THAT(deadlock, ContainsSubstring("rank 0 waits at 0B0 for 1SEND_B0 (rank 1)"));
  CHECK_THAT(deadlock, ContainsSubstring("rank 1 waits at 1F1 for 0SEND_F1 (rank 0)"));
  CHECK_THAT(deadlock, ContainsSubstring("[0B0]"));
  CHECK_THAT(deadlock, ContainsSubstring("[1F1]"));
  // A split backward whose W runs before its I.
  CHECK_THAT(validate_error("0F0,0W0,0I0\n"), ContainsSubstring("(rule: I before W on its rank)"));
}

TEST_CASE("program_hash: equal programs hash equal; moving one action changes it") {
  const Program a = generate({ScheduleKind::Interleaved1F1B, 4, 2, 8, 0});
  const Program b = generate({ScheduleKind::Interleaved1F1B, 4, 2, 8, 0});
  CHECK(program_hash(a) == program_hash(b));
  // The CSV holds compute actions only; with communication added back the program is the same.
  CHECK(program_hash(add_communication(parse_csv(to_csv(a), "x"))) == program_hash(a));

  Program moved = a;
  std::swap(moved.ranks[1][3], moved.ranks[1][4]);
  REQUIRE(moved.ranks[1] != a.ranks[1]);
  CHECK(program_hash(moved) != program_hash(a));

  Program placed = generate_compute({ScheduleKind::OneFOneB, 2, 1, 2, 0});
  const uint64_t before = program_hash(placed);
  placed.num_microbatches = 3;
  CHECK(program_hash(placed) != before);

  // FNV-1a 64 over the canonical text "ppctl program v1\nstages 1\nmicrobatches 1\n
  // stage_to_rank 0\nrank 0: 0F0 0B0" (computed independently): the same on every machine.
  const Program tiny = parse_csv("0F0,0B0\n", "tiny.csv");
  CHECK(program_hash(tiny) == 0x00f07ecdb56d2a79ULL);
  CHECK(program_hash(tiny) == program_hash(parse_csv("0F0 , 0B0", "other.csv")));
  CHECK(program_hash(tiny) != program_hash(parse_csv("0F0,0I0,0W0\n", "split.csv")));
}

TEST_CASE("the CSV example in docs/schedules.md loads and validates") {
  const std::string csv =
      test::first_code_block(std::string(PPCTL_SOURCE_DIR) + "/docs/schedules.md", "csv");
  REQUIRE_FALSE(csv.empty());
  const Program program = parse_csv(csv, "README.md");
  CHECK(program.num_ranks() == 2);
  CHECK(program.num_microbatches == 4);
  REQUIRE_NOTHROW(validate(add_communication(program)));
}
