// A failing worker's cause, published through the job's rendezvous store (key ppctl/failure/<rank>)
// so the launcher's final line carries it and blames the rank that failed first rather than a peer
// that failed because of it (issue 12, F2 and F5); and a stopped worker's exit code (ppctl/stopped/<rank>),
// so a second Ctrl-C while it exits is not taken for a failure. The header is torch-free; c10d is in the .cpp.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// The store key of rank `rank`'s failure report: "ppctl/failure/<rank>".
std::string failure_key(int rank);

/// What a failing worker tells the launcher before it exits.
struct FailureReport {
  int exit_code = 1;          ///< the code the worker exits with (2: bad input, not restarted)
  std::string cause;          ///< one line: the error message
  bool peer_failure = false;  ///< a communication error (CommError): likely a consequence of a peer's failure
};

/// JSON text of `report` ({"exit_code", "cause", "peer_failure"}).
std::string encode_failure(const FailureReport& report);
/// The report in `text`; nullopt when it is not one (never throws).
std::optional<FailureReport> decode_failure(const std::string& text);

/// Sets rank info.rank's failure report in the store at info.master_addr:info.master_port through a
/// client of its own (joined within `timeout`), and reads it back, so the store holds it before this
/// process exits. Only to a store another process hosts (not when info.host_store). Returns false
/// when the store cannot be reached; never throws.
bool publish_failure(const RendezvousInfo& info, std::chrono::milliseconds timeout,
                     const FailureReport& report);

/// The store key of rank `rank`'s stop report: "ppctl/stopped/<rank>".
std::string stop_key(int rank);

/// Sets rank info.rank's stop report, the code it is about to exit with after stopping on a signal
/// (launch::kExitStoppedResumable once its checkpoint is complete, else 128 + the signal), as publish_failure
/// sets a failure report (same client, timeout and round trip). Call it after the rank's last collective:
/// from then on nothing is lost by ending it. Returns false when the store cannot be reached; never throws.
bool publish_stop(const RendezvousInfo& info, std::chrono::milliseconds timeout, int exit_code);

/// The exit code in a stop report's text; nullopt when it is not one (never throws).
std::optional<int> decode_stop(const std::string& text);

}  // namespace ppctl::comm
