// EventFileWriter: Event protos (tensorboard_event.proto) framed as TFRecords, appended with write(2).
#include "interop/event_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "interop/tensorboard_event.pb.h"
#include "interop/tfrecord.hpp"

namespace ppctl::interop {
namespace {

namespace fs = std::filesystem;

/// The version string TensorBoard expects in a file's first record (TensorFlow's EventsWriter).
constexpr const char* kFileVersion = "brain.Event:2";

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

std::string serialise(const tensorboard::Event& event) {
  std::string bytes;
  if (!event.SerializeToString(&bytes)) throw Error("cannot serialise a TensorBoard event (protobuf)");
  return bytes;
}

}  // namespace

std::string event_file_name(int64_t seconds, const std::string& host, int64_t pid) {
  return fmt::format("events.out.tfevents.{}.{}.{}", seconds, host, pid);
}

EventFileWriter::EventFileWriter(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    throw Error(fmt::format("cannot create the TensorBoard folder {}: {} (fix: make it writable, or set "
                            "observe.tensorboard: false)",
                            folder.string(), ec.message()));
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  const std::string base = event_file_name(seconds, host_name(), ::getpid());
  int fd = -1;
  for (int suffix = 0; fd < 0; ++suffix) {
    path_ = folder / (suffix == 0 ? base : fmt::format("{}.{}", base, suffix));
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
      throw Error(fmt::format("cannot create the TensorBoard event file {}: {} (fix: make the folder "
                              "writable, or set observe.tensorboard: false)",
                              path_.string(), std::strerror(errno)));
    }
  }
  file_.emplace(path_, fd, "the TensorBoard event file");
  tensorboard::Event event;
  event.set_wall_time(wall_time_now());
  event.set_file_version(kFileVersion);
  write_record(serialise(event));
}

EventFileWriter::~EventFileWriter() = default;

void EventFileWriter::write_scalars(int64_t step, const std::vector<Scalar>& scalars) {
  if (scalars.empty()) return;
  tensorboard::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  auto* summary = event.mutable_summary();
  for (const auto& scalar : scalars) {
    auto* value = summary->add_value();
    value->set_tag(scalar.tag);
    value->set_simple_value(static_cast<float>(scalar.value));
  }
  write_record(serialise(event));
}

void EventFileWriter::write_session_start(int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  write_record(serialise(event));
}

void EventFileWriter::write_record(const std::string& event) { file_->append(tfrecord_frame(event)); }

}  // namespace ppctl::interop
