// Per-rank progress records: encoding, the stall finder (launcher side) and the publisher thread
// (worker side, its own c10d TCPStore client).
#include "comm/progress_board.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm/error_text.hpp"
#include "core/error.hpp"

namespace ppctl::comm {

std::string progress_key(int rank) { return fmt::format("ppctl/progress/{}", rank); }

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Starting: return "start-up";
    case Phase::Schedule: return "schedule";
    case Phase::GradientSync: return "gradient reduction";
    case Phase::Optimizer: return "optimizer step";
    case Phase::Eval: return "evaluation";
    case Phase::Checkpoint: return "checkpoint";
    case Phase::Finishing: return "finishing";
  }
  return "unknown phase";
}

std::string encode_progress(const ProgressRecord& record) {
  return nlohmann::json{{"step", record.step},
                        {"action", record.action},
                        {"since", record.since_s},
                        {"beat", record.beat_s}}
      .dump();
}

std::optional<ProgressRecord> decode_progress(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  try {
    return ProgressRecord{json.at("step").get<int64_t>(), json.at("action").get<std::string>(),
                          json.at("since").get<double>(), json.at("beat").get<double>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<Stall> find_stall(const std::vector<std::optional<ProgressRecord>>& records,
                                const std::vector<int>& running, double now_s, double stale_after_s) {
  std::optional<Stall> found;
  for (const int rank : running) {
    if (rank < 0 || static_cast<size_t>(rank) >= records.size() || !records[rank]) continue;
    const double silent = now_s - records[rank]->beat_s;
    if (silent > stale_after_s && (!found || silent > found->silent_s))
      found = Stall{rank, *records[rank], silent};
  }
  return found;
}

std::string describe_stall(const Stall& stall) {
  return fmt::format("no progress report for {:.1f} s; last seen in step {}, {}", stall.silent_s,
                     stall.last.step, stall.last.action);
}

double wall_clock_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct ProgressPublisher::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  const ProgressCursor* cursor = nullptr;
  std::function<std::string(int64_t)> describe;
  int64_t actions_per_step = 0;
  std::string key;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  /// Publishes until stopped; records when the (step, phase, position) last changed.
  void run() {
    int64_t last_step = -1, last_position = -1;
    int last_phase = -1;
    double since = wall_clock_s();
    std::unique_lock lock(mutex);
    while (!stopping) {
      lock.unlock();
      const int64_t step = cursor->step.load(std::memory_order_relaxed);
      const int phase = cursor->phase.load(std::memory_order_relaxed);
      const int64_t position = cursor->position.load(std::memory_order_relaxed);
      const double now = wall_clock_s();
      if (step != last_step || phase != last_phase || position != last_position) {
        since = now;
        last_step = step;
        last_phase = phase;
        last_position = position;
      }
      std::string action = phase_name(static_cast<Phase>(phase));
      if (static_cast<Phase>(phase) == Phase::Schedule) {
        action += fmt::format(", action {} of {} ({})", position + 1, actions_per_step, describe(position));
      }
      try {
        const auto text = encode_progress({step, action, since, now});
        store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
      } catch (const std::exception& e) {  // the store is gone: the job is ending
        spdlog::debug("progress publishing stopped: {}", error_text(e));
        return;
      }
      lock.lock();
      wake.wait_for(lock, kProgressInterval, [this] { return stopping; });
    }
  }
};

ProgressPublisher::ProgressPublisher(const RendezvousInfo& info, std::chrono::milliseconds timeout,
                                     const ProgressCursor& cursor,
                                     std::function<std::string(int64_t)> describe,
                                     int64_t actions_per_step)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.master_port);
  options.isServer = false;  // a second client of the job's store (the process groups have theirs)
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot reach the rendezvous store at {}:{} to publish "
                                "progress: {}",
                                info.rank, info.master_addr, info.master_port, error_text(e)));
  }
  impl_->cursor = &cursor;
  impl_->describe = std::move(describe);
  impl_->actions_per_step = actions_per_step;
  impl_->key = progress_key(info.rank);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

ProgressPublisher::~ProgressPublisher() {
  {
    const std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

}  // namespace ppctl::comm
