// Tests for interop/crc32c, interop/tfrecord and interop/event_file: the CRC-32C check values of
// RFC 3720, TFRecord framing read back byte by byte, and the event files the writer leaves (their
// contents are read by TensorBoard itself in tests/interop/test_tensorboard.py).
#include <catch2/catch_test_macros.hpp>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "interop/crc32c.hpp"
#include "interop/event_file.hpp"
#include "interop/tfrecord.hpp"
#include "support/errors.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl::interop;

namespace {

uint64_t read_le(const std::string& bytes, size_t at, int count) {
  uint64_t value = 0;
  for (int k = 0; k < count; ++k) value |= uint64_t{static_cast<unsigned char>(bytes.at(at + k))} << (8 * k);
  return value;
}

/// The records of a TFRecord stream; FAILs on a bad length or checksum or a cut record.
std::vector<std::string> read_records(const std::string& stream) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < stream.size()) {
    REQUIRE(stream.size() - at >= kTfRecordOverhead);
    const uint64_t length = read_le(stream, at, 8);
    REQUIRE(read_le(stream, at + 8, 4) == mask_crc32c(crc32c(stream.substr(at, 8))));
    REQUIRE(stream.size() - at - kTfRecordOverhead >= length);
    records.push_back(stream.substr(at + 12, length));
    REQUIRE(read_le(stream, at + 12 + length, 4) == mask_crc32c(crc32c(records.back())));
    at += length + kTfRecordOverhead;
  }
  return records;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The protobuf wire bytes of field 2 (fixed32) holding `value`: Summary.Value.simple_value.
std::string simple_value_bytes(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  std::string out(1, '\x15');  // field 2, wire type 5
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>((bits >> (8 * k)) & 0xFFu));
  return out;
}

}  // namespace

TEST_CASE("CRC-32C gives the published check values", "[interop][tensorboard]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  // RFC 3720 (iSCSI), appendix B.4: 32 bytes of zeros, of ones, ascending and descending.
  std::string ascending, descending;
  for (int k = 0; k < 32; ++k) {
    ascending.push_back(static_cast<char>(k));
    descending.push_back(static_cast<char>(31 - k));
  }
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(crc32c(descending) == 0x113FDB5Cu);
  // Pieces continue the checksum.
  CHECK(crc32c("56789", crc32c("1234")) == 0xE3069283u);
}

TEST_CASE("the TFRecord mask rotates right by 15 and adds TensorFlow's constant", "[interop][tensorboard]") {
  CHECK(mask_crc32c(0) == 0xA282EAD8u);
  CHECK(mask_crc32c(1) == 0xA282EAD8u + 0x20000u);            // bit 0 lands on bit 17
  CHECK(mask_crc32c(0x8000u) == 0xA282EAD8u + 1u);            // bit 15 lands on bit 0
  CHECK(mask_crc32c(0xFFFFFFFFu) == 0xA282EAD8u - 1u);        // wraps mod 2^32
}

TEST_CASE("a TFRecord is length, masked CRC of the length, data, masked CRC of the data",
          "[interop][tensorboard]") {
  const std::string data = "some event bytes";
  const std::string record = tfrecord_frame(data);
  REQUIRE(record.size() == data.size() + 16);
  CHECK(read_le(record, 0, 8) == data.size());
  CHECK(read_le(record, 8, 4) == mask_crc32c(crc32c(record.substr(0, 8))));
  CHECK(record.substr(12, data.size()) == data);
  CHECK(read_le(record, 12 + data.size(), 4) == mask_crc32c(crc32c(data)));
  CHECK(read_records(tfrecord_frame("") + record) == std::vector<std::string>{"", data});
}

TEST_CASE("an event file starts with the file version and gets one record per write", "[interop][tensorboard]") {
  const ppctl::test::TempDir dir;
  const auto folder = dir.path / "run" / "tb";  // made with its parents
  EventFileWriter writer(folder);
  const std::regex name(R"(events\.out\.tfevents\.[0-9]{10}\..+\.)" + std::to_string(::getpid()));
  CHECK(std::regex_match(writer.path().filename().string(), name));
  CHECK(writer.path().parent_path() == folder);

  auto records = read_records(read_file(writer.path()));  // written through, nothing buffered
  REQUIRE(records.size() == 1);
  CHECK(records[0].find("brain.Event:2") != std::string::npos);

  writer.write_scalars(7, {{"train/loss", 2.5}, {"train/lr", 0.0}});
  writer.write_scalars(8, {});  // nothing
  records = read_records(read_file(writer.path()));
  REQUIRE(records.size() == 2);
  CHECK(records[1].find("train/loss") != std::string::npos);
  CHECK(records[1].find(simple_value_bytes(2.5f)) != std::string::npos);
  CHECK(records[1].find("train/lr") != std::string::npos);
  CHECK(records[1].find(simple_value_bytes(0.0f)) != std::string::npos);  // a zero is written, too

  // A second writer in the same second and process gets a file of its own.
  EventFileWriter second(folder);
  CHECK(second.path() != writer.path());
  CHECK(read_records(read_file(second.path())).size() == 1);
  CHECK(read_records(read_file(writer.path())).size() == 2);
}

TEST_CASE("an event file that cannot be made names its folder", "[interop][tensorboard]") {
  const ppctl::test::TempDir dir;
  std::ofstream(dir.path / "file") << "x";
  const auto message = ppctl::test::message_of<ppctl::Error>(
      [&] { EventFileWriter writer(dir.path / "file" / "tb"); }, "a folder under a file was accepted");
  CHECK(message.find((dir.path / "file" / "tb").string()) != std::string::npos);
  CHECK(message.find("observe.tensorboard: false") != std::string::npos);
}
