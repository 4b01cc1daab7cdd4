// Tests of launch/cpu_placement: splitting the affinity mask among workers, and the oversubscription warning.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <set>
#include <vector>

#include "launch/cpu_placement.hpp"

using Catch::Matchers::ContainsSubstring;
using ppctl::launch::place_workers;

TEST_CASE("workers that fit get disjoint, consecutive CPUs of the mask, T each") {
  const std::vector<int> cpus = {0, 2, 3, 5, 8, 9, 10, 11};
  for (int workers = 1; workers <= 8; ++workers) {
    for (int threads = 1; workers * threads <= 8; ++threads) {
      INFO(workers << " workers x " << threads << " threads");
      const auto p = place_workers(cpus, workers, threads, true);
      CHECK_FALSE(p.oversubscribed);
      REQUIRE(p.per_worker.size() == static_cast<size_t>(workers));
      std::set<int> seen;
      for (int r = 0; r < workers; ++r) {
        const auto& mine = p.per_worker[static_cast<size_t>(r)];
        REQUIRE(mine.size() == static_cast<size_t>(threads));
        for (int i = 0; i < threads; ++i) CHECK(mine[static_cast<size_t>(i)] == cpus[static_cast<size_t>(r * threads + i)]);
        seen.insert(mine.begin(), mine.end());
      }
      CHECK(seen.size() == static_cast<size_t>(workers * threads));  // no CPU shared
    }
  }
}

TEST_CASE("cpu_binding none binds nothing, and says nothing when the threads fit") {
  const auto p = place_workers({0, 1, 2, 3}, 2, 2, false);
  CHECK(p.per_worker.empty());
  CHECK_FALSE(p.oversubscribed);
}

TEST_CASE("more threads than CPUs: nothing bound, a warning naming both numbers, the mask and the fix") {
  const auto p = place_workers({0, 1}, 4, 4, true);
  CHECK(p.per_worker.empty());
  REQUIRE(p.oversubscribed);
  CHECK_THAT(*p.oversubscribed, ContainsSubstring("4 workers x runtime.threads_per_worker 4 = 16 threads") &&
                                    ContainsSubstring("more than the 2 CPUs this process may use (CPUs 0, 1): the workers are left unbound") &&
                                    ContainsSubstring("fix: fewer stages or data-parallel replicas"));
  const auto q = place_workers({0, 1, 2, 3, 4, 5, 6, 7}, 2, 8, false);  // also without binding
  REQUIRE(q.oversubscribed);
  CHECK_THAT(*q.oversubscribed, ContainsSubstring("fix: runtime.threads_per_worker 4, or fewer workers"));
  CHECK_THAT(*q.oversubscribed, ContainsSubstring("(CPUs 0-7)"));
  const auto one = place_workers({3}, 2, 1, true);
  REQUIRE(one.oversubscribed);
  CHECK_THAT(*one.oversubscribed, ContainsSubstring("more than the 1 CPU this process may use (CPUs 3)"));
}
