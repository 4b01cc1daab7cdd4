// TensorBoard event files: a TFRecord stream of Event protocol buffers (interop/tfrecord.hpp,
// interop/tensorboard_event.proto) holding scalars, as TensorFlow's and PyTorch's SummaryWriter write
// them, readable by `tensorboard --logdir`. Torch-free; protobuf stays inside event_file.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/append_file.hpp"

namespace ppctl::interop {

/// One scalar of an event: TensorBoard's tag (its chart, e.g. "train/loss") and value. TensorBoard
/// stores scalars as float (Summary.Value.simple_value): the value is rounded to the nearest float.
struct Scalar {
  std::string tag;
  double value = 0.0;
};

/// `events.out.tfevents.<seconds>.<host>.<pid>`: TensorFlow's name for an event file (TensorBoard
/// reads every file whose name contains "tfevents"), for `seconds` since the Unix epoch.
std::string event_file_name(int64_t seconds, const std::string& host, int64_t pid);

/// Appends events to a new event file. Each record is handed to write(2) whole as soon as it is made
/// (no user-space buffer), so a running job can be watched and a killed one leaves at most a last
/// record cut short, which TensorBoard's reader skips; a failed write (a full disk) is cut back to the
/// last whole record (core::AppendOnlyFile).
class EventFileWriter {
 public:
  /// Creates `folder` (and its parents) and in it a new event file named event_file_name(now, this
  /// host, this process) (with a `.1`, `.2`, ... suffix when that name exists), then writes its first
  /// record: an Event with file_version "brain.Event:2". Throws ppctl::Error naming the path and the
  /// reason when the folder or the file cannot be made or written.
  explicit EventFileWriter(const std::filesystem::path& folder);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// The event file.
  const std::filesystem::path& path() const { return path_; }

  /// Writes one Event at `step` (TensorBoard's x axis) with the wall time now and one
  /// Summary.Value per scalar (simple_value, as float; NaN and infinities are kept as such).
  /// Nothing is written for no scalars. Throws ppctl::Error naming the file when the write fails.
  void write_scalars(int64_t step, const std::vector<Scalar>& scalars);

  /// Writes a SessionLog START event at `step`: the session (a run, or a restarted attempt of it) goes on
  /// from `step`. TensorBoard's event loader (EventAccumulator, purge_orphaned_data on by default) then
  /// drops every event of this run it has read at `step` or later, in this file or earlier ones, so
  /// steps repeated after a restart show once, with the values written after this event. Throws
  /// ppctl::Error naming the file when the write fails.
  void write_session_start(int64_t step);

 private:
  /// Frames `event` (a serialised Event) and writes it. Throws ppctl::Error on failure.
  void write_record(const std::string& event);

  std::filesystem::path path_;
  std::optional<core::AppendOnlyFile> file_;  ///< records land whole or not at all
};

}  // namespace ppctl::interop
