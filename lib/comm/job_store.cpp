// The shared connection to the job's rendezvous store: joining, setting and bounded waits for keys.
#include "comm/job_store.hpp"

#include <fmt/format.h>

#include <thread>

#include "comm/error_text.hpp"
#include "comm/tcp_store.hpp"
#include "core/error.hpp"

namespace ppctl::comm {

JobStore::JobStore(const RendezvousInfo& info, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(Impl{join_store(info, timeout), info})) {}

JobStore::~JobStore() = default;

const RendezvousInfo& JobStore::info() const { return impl_->info; }

void JobStore::set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot set key {} in the rendezvous store at {}:{}: {}", impl_->info.rank,
                                key, impl_->info.master_addr, impl_->info.master_port, error_text(e)));
  }
}

std::optional<std::string> JobStore::wait_get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    // Polling with check() rather than c10d's wait(): its timeout error carries a backtrace and the
    // store's keys, and a store that closes meanwhile must end the wait too.
    while (!impl_->store->check({key})) {
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto value = impl_->store->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: the rendezvous store at {}:{} failed while this rank waited for key {} "
                                "({}); rank 0 hosts it: see its output",
                                impl_->info.rank, impl_->info.master_addr, impl_->info.master_port, key,
                                error_text(e)));
  }
}

}  // namespace ppctl::comm
