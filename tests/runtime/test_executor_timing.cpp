// Executor timing (runtime/executor.hpp, StepResult): an action's CPU time leaves out the time its
// thread waited for a core, where its wall time (compute_ms) holds it; a parameter all-gather wait counts
// only when one was in flight, however long the call took.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/whole_model_step.hpp"

using namespace ppctl;

namespace {

/// Pins the calling thread to `cpu` (returns false when the system refuses).
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

/// A second thread spinning on `cpu` until destroyed; the destructor also gives the calling thread
/// back the CPUs it had, whether the test body returned or threw.
class SpinnerOnSameCore {
 public:
  SpinnerOnSameCore(int cpu, const cpu_set_t& restore) : restore_(restore) {
    thread_ = std::thread([this, cpu] {
      pinned_ = pin_to(cpu) ? 1 : -1;
      while (!stop_.load(std::memory_order_relaxed)) {
      }
    });
    while (pinned_.load() == 0) std::this_thread::yield();
  }
  ~SpinnerOnSameCore() {
    stop_ = true;
    thread_.join();
    pthread_setaffinity_np(pthread_self(), sizeof(restore_), &restore_);
  }
  SpinnerOnSameCore(const SpinnerOnSameCore&) = delete;
  SpinnerOnSameCore& operator=(const SpinnerOnSameCore&) = delete;
  [[nodiscard]] bool pinned() const { return pinned_.load() == 1; }

 private:
  cpu_set_t restore_;
  std::atomic<bool> stop_{false};
  std::atomic<int> pinned_{0};  // 0 until the thread has tried, then 1 (pinned) or -1 (refused)
  std::thread thread_;
};

/// A ParameterGather whose every call takes `ms` and reports `in_flight`: a slow lookup (a loaded machine
/// preempting the thread) or a real wait.
class SlowGather final : public runtime::ParameterGather {
 public:
  SlowGather(double ms, bool in_flight) : ms_(ms), in_flight_(in_flight) {}
  bool ready(int64_t) override {
    ++calls;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms_));
    return in_flight_;
  }
  int64_t calls = 0;

 private:
  double ms_;
  bool in_flight_;
};

}  // namespace

TEST_CASE("a parameter all-gather wait counts only when one was in flight, however long the call took") {
  const config::ModelSpec model{256, 2, 32, 4, 16, 0.0};
  SlowGather looked(2.0, false);  // nothing in flight, yet each call took 2 ms (the old 10 us threshold counted it)
  CHECK(test::whole_model_step(model, 4, 2, {}, &looked).result.gather_wait_ms == 0.0);
  CHECK(looked.calls == 4);  // asked before each forward
  SlowGather waited(2.0, true);
  const double ms = test::whole_model_step(model, 4, 2, {}, &waited).result.gather_wait_ms;
  CHECK(waited.calls == 4);
  CHECK(ms >= 4 * 2.0);
  CHECK(ms < 4 * 2.0 + 1000.0);  // milliseconds, not microseconds
}

TEST_CASE("an action's CPU time leaves out the time its thread waited for a core") {
  cpu_set_t before;
  REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof(before), &before) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &before)) ++cpu;
  runtime::StepResult shared;
  {
    // A second thread spins on the same core for the whole step: the step's thread gets about half of it.
    SpinnerOnSameCore spinner(cpu, before);
    if (!pin_to(cpu) || !spinner.pinned()) SKIP("this system refuses to pin threads to a CPU");
    // One GPipe step of a whole 4-block GPT of width 128 on this thread, 8 microbatches of 4 x 128 tokens.
    shared = test::whole_model_step({256, 4, 128, 4, 128, 0.0}, 8, 4).result;
  }

  for (const auto kind : {schedule::ActionKind::F, schedule::ActionKind::B}) {
    const auto k = static_cast<size_t>(kind);
    INFO("kind " << k << ": wall " << shared.compute_ms[k] << " ms, CPU " << shared.compute_cpu_ms[k] << " ms");
    CHECK(shared.compute_count[k] == 8);
    CHECK(shared.compute_cpu_ms[k] > 0.0);
    // Wall time holds the spinner's share of the core; CPU time does not. The lower bound catches a
    // wrong unit (seconds, microseconds) with a margin for other load on the same core.
    CHECK(shared.compute_cpu_ms[k] < 0.75 * shared.compute_ms[k]);
    CHECK(shared.compute_cpu_ms[k] > 0.1 * shared.compute_ms[k]);
  }
  for (const auto kind : {schedule::ActionKind::I, schedule::ActionKind::W}) {
    CHECK(shared.compute_cpu_ms[static_cast<size_t>(kind)] == 0.0);  // GPipe runs no split backward
  }
}
