// Tests of comm/progress_board: record encoding, the stall finder, and a publisher writing through a
// real rendezvous store read back with StoreServer::try_get.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "comm/progress_board.hpp"
#include "comm/rendezvous.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using ppctl::comm::ProgressRecord;

TEST_CASE("progress records round-trip through their text; other text is no record") {
  const ProgressRecord record{7, "schedule, action 3 of 8 (1B0)", 1.7e9 + 0.25, 1.7e9 + 1.5};
  const auto back = ppctl::comm::decode_progress(ppctl::comm::encode_progress(record));
  REQUIRE(back.has_value());
  CHECK(back->step == 7);
  CHECK(back->action == record.action);
  CHECK(back->since_s == record.since_s);
  CHECK(back->beat_s == record.beat_s);
  for (const char* bad : {"", "not json", "[1,2]", "{\"step\": 1}", "{\"step\":\"x\",\"action\":1,\"since\":0,\"beat\":0}"})
    CHECK_FALSE(ppctl::comm::decode_progress(bad).has_value());
  CHECK(ppctl::comm::progress_key(3) == "ppctl/progress/3");
}

TEST_CASE("find_stall names the running rank silent longest beyond the threshold") {
  const double now = 1000.0;
  std::vector<std::optional<ProgressRecord>> records(4);
  records[0] = ProgressRecord{5, "schedule", 990.0, now - 0.2};   // publishing: waiting for a peer
  records[1] = ProgressRecord{5, "optimizer step", 994.0, now - 6.0};  // silent 6 s
  records[2] = ProgressRecord{4, "checkpoint", 980.0, now - 9.0};  // silent longer, but has exited
  // rank 3: no record yet
  const auto stall = ppctl::comm::find_stall(records, {1, 3, 0}, now, 2.0);
  REQUIRE(stall.has_value());
  CHECK(stall->rank == 1);
  CHECK(stall->silent_s == 6.0);
  CHECK(ppctl::comm::describe_stall(*stall) ==
        "no progress report for 6.0 s; last seen in step 5, optimizer step");

  CHECK_FALSE(ppctl::comm::find_stall(records, {0, 3}, now, 2.0).has_value());  // all fresh or none
  CHECK_FALSE(ppctl::comm::find_stall(records, {1}, now, 10.0).has_value());     // under the threshold
  const auto longest = ppctl::comm::find_stall(records, {0, 1, 2}, now, 2.0);
  REQUIRE(longest.has_value());
  CHECK(longest->rank == 2);
}

TEST_CASE("a publisher's record reaches the launcher's store and follows the cursor") {
  ppctl::comm::StoreServer store("127.0.0.1", 0, 1, 10s);
  ppctl::comm::RendezvousInfo info;
  info.rank = 2;
  info.world_size = 3;
  info.master_port = store.port();
  CHECK_FALSE(store.try_get(ppctl::comm::progress_key(2)).has_value());

  ppctl::comm::ProgressCursor cursor;
  cursor.step = 4;
  cursor.phase = static_cast<int>(ppctl::comm::Phase::Schedule);
  cursor.position = 1;
  const auto before = ppctl::comm::wall_clock_s();
  // The record as the store holds it now, once `ready` holds for it (polled: a loaded machine may
  // starve the publisher's thread for a while, so no fixed sleep decides).
  const auto record_when = [&](const auto& ready) {
    std::optional<ProgressRecord> record;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (const auto text = store.try_get(ppctl::comm::progress_key(2))) {
        record = ppctl::comm::decode_progress(*text);
        if (record.has_value() && ready(*record)) break;
      }
      std::this_thread::sleep_for(ppctl::comm::kProgressInterval / 4);
    }
    return record;
  };
  {
    const ppctl::comm::ProgressPublisher publisher(
        info, 10s, cursor, [](int64_t position) { return "action#" + std::to_string(position); }, 6);
    // Refreshed while the cursor stood still.
    const auto record = record_when([](const ProgressRecord& r) { return r.beat_s > r.since_s; });
    REQUIRE(record.has_value());
    CHECK(record->step == 4);
    CHECK(record->action == "schedule, action 2 of 6 (action#1)");
    CHECK(record->since_s >= before);
    CHECK(record->beat_s > record->since_s);

    cursor.phase = static_cast<int>(ppctl::comm::Phase::Checkpoint);
    const auto later = record_when([](const ProgressRecord& r) { return r.action == "checkpoint"; });
    REQUIRE(later.has_value());
    CHECK(later->action == "checkpoint");
    CHECK(later->since_s > record->since_s);
  }
  // Stopped: no more refreshes.
  const auto last = ppctl::comm::decode_progress(*store.try_get(ppctl::comm::progress_key(2)));
  std::this_thread::sleep_for(ppctl::comm::kProgressInterval * 2);
  CHECK(ppctl::comm::decode_progress(*store.try_get(ppctl::comm::progress_key(2)))->beat_s == last->beat_s);
}
