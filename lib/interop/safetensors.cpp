// safetensors: header parsing and validation over a read-only memory map, fp32 conversion, and the
// atomic writer.
#include "interop/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.hpp"
#include "core/check.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"

namespace ppctl::interop {
namespace {

/// The reference implementation refuses headers above 100 MB (safetensors' MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& why) {
  throw CheckpointError(fmt::format("{}: not a valid safetensors file: {} (fix: re-save it with "
                                    "safetensors/transformers save_pretrained, or copy it again if it "
                                    "was cut short)",
                                    core::echo_label(path.string()), why));
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// IEEE 754 binary16 -> binary32 (exact), subnormals and infinities/NaN included.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return from_bits(sign);
  int e = -1;  // subnormal: normalise
  do {
    ++e;
    mantissa <<= 1;
  } while ((mantissa & 0x400u) == 0);
  return from_bits(sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13));
}

/// One entry of the header, validated against the rules of the format.
TensorInfo parse_entry(const std::filesystem::path& path, const std::string& name,
                       const nlohmann::json& entry) {
  const auto where = fmt::format("tensor '{}'", core::echo_value(name));
  if (!entry.is_object()) bad_file(path, where + " is not a JSON object");
  TensorInfo info;
  info.name = name;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) bad_file(path, where + " has no string 'dtype'");
  info.dtype = dtype->get<std::string>();
  if (dtype_size(info.dtype) == 0) bad_file(path, fmt::format("{} has unknown dtype '{}'", where, core::echo_value(info.dtype)));
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) bad_file(path, where + " has no 'shape' list");
  for (const auto& size : *shape) {
    if (!size.is_number_integer() || size.get<int64_t>() < 0) {
      bad_file(path, fmt::format("{} has shape {}: sizes must be integers >= 0", where, shape->dump()));
    }
    info.shape.push_back(size.get<int64_t>());
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    bad_file(path, where + " needs 'data_offsets': [BEGIN, END], two integers >= 0");
  }
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.end < info.begin) {
    bad_file(path, fmt::format("{} has data_offsets [{}, {}]: END is before BEGIN", where, info.begin, info.end));
  }
  // numel x size in 128 bits' worth of care: reject products that overflow.
  uint64_t bytes = dtype_size(info.dtype);
  for (int64_t size : info.shape) {
    const auto s = static_cast<uint64_t>(size);
    if (s != 0 && bytes > std::numeric_limits<uint64_t>::max() / s) bad_file(path, where + " is too large");
    bytes *= s;
  }
  if (info.end - info.begin != bytes) {
    bad_file(path, fmt::format("{} ({} {}) needs {} bytes but data_offsets [{}, {}] span {}", where,
                               info.dtype, shape->dump(), bytes, info.begin, info.end,
                               info.end - info.begin));
  }
  for (const auto& [key, ignored] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      bad_file(path, fmt::format("{} has unknown field '{}'", where, core::echo_value(key)));
    }
  }
  return info;
}

/// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"F64", 8}, {"I64", 8},
      {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw CheckpointError(fmt::format("cannot open {}: {} (fix: check the path and its permissions)",
                                      core::echo_label(path.string()), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    bad_file(path, "it is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  try {
    if (size_ < 8) bad_file(path, fmt::format("{} bytes, shorter than the 8-byte header length", size_));
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      throw CheckpointError(fmt::format("cannot map {}: {}", core::echo_label(path.string()), std::strerror(errno)));
    }
    const auto* bytes = static_cast<const unsigned char*>(map_);
    const uint64_t header_bytes = read_u64_le(bytes);
    if (header_bytes < 2) bad_file(path, fmt::format("header length {} (at least 2: '{{}}')", header_bytes));
    if (header_bytes > kMaxHeaderBytes) {
      bad_file(path, fmt::format("header length {} is above the format's limit of {} bytes", header_bytes,
                                 kMaxHeaderBytes));
    }
    if (header_bytes > size_ - 8) {
      bad_file(path, fmt::format("header length {} reaches past the end of the file ({} bytes): the "
                                 "file is truncated or not safetensors",
                                 header_bytes, size_));
    }
    data_start_ = 8 + header_bytes;
    const char* text = reinterpret_cast<const char*>(bytes + 8);
    if (text[0] != '{') bad_file(path, "the header does not start with '{'");
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text, text + header_bytes);
    } catch (const nlohmann::json::exception& e) {
      bad_file(path, std::string("the header is not valid JSON: ") + core::escape_control(e.what()));
    }
    if (!header.is_object()) bad_file(path, "the header is not a JSON object");
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) bad_file(path, "__metadata__ is not an object");
        for (const auto& [key, value] : entry.items()) {
          if (!value.is_string()) bad_file(path, fmt::format("__metadata__ '{}' is not a string", core::echo_value(key)));
          metadata_[key] = value.get<std::string>();
        }
        continue;
      }
      tensors_.emplace(name, parse_entry(path, name, entry));
    }
    // The tensors tile [0, buffer) in offset order, as the reference implementation requires.
    std::vector<const TensorInfo*> ordered;
    for (const auto& [name, info] : tensors_) ordered.push_back(&info);
    std::sort(ordered.begin(), ordered.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t expected = 0;
    for (const auto* info : ordered) {
      if (info->begin != expected) {
        bad_file(path, fmt::format("tensor '{}' starts at data offset {} where {} was expected "
                                   "(tensors overlap or leave a hole)",
                                   core::echo_value(info->name), info->begin, expected));
      }
      expected = info->end;
    }
    const uint64_t buffer = size_ - data_start_;
    if (expected > buffer) {
      const auto* last = ordered.back();
      bad_file(path, fmt::format("truncated: tensor '{}' ends at data offset {} but the file holds only "
                                 "{} data bytes",
                                 core::echo_value(last->name), last->end, buffer));
    }
    if (expected < buffer) {
      bad_file(path, fmt::format("{} bytes after the last tensor's end (data offset {})", buffer - expected,
                                 expected));
    }
  } catch (...) {
    if (map_ != nullptr) ::munmap(map_, size_);
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const unsigned char* SafetensorsFile::data(const TensorInfo& info) const {
  return static_cast<const unsigned char*>(map_) + data_start_ + info.begin;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const auto* info = find(name);
  PPCTL_CHECK(info != nullptr, CheckpointError,
              fmt::format("{}: no tensor '{}'", core::echo_label(path_.string()), core::echo_value(name)),
              "check the file's tensor names (python: safetensors.safe_open(path, 'pt').keys())");
  const int64_t rows = info->shape.empty() ? 1 : info->shape[0];
  const int64_t cols = rows == 0 ? 0 : info->numel() / rows;
  std::vector<float> out(static_cast<size_t>(info->numel()));
  read_f32_block(*info, 0, rows, 0, cols, out.data(), cols);
  return out;
}

uint64_t SafetensorsFile::read_f32_block(const TensorInfo& info, int64_t row_begin, int64_t rows, int64_t col_begin,
                                         int64_t cols, float* out, int64_t out_stride) const {
  const int64_t all_rows = info.shape.empty() ? 1 : info.shape[0];
  const int64_t all_cols = all_rows == 0 ? 0 : info.numel() / all_rows;
  PPCTL_ASSERT(row_begin >= 0 && rows >= 0 && row_begin + rows <= all_rows && col_begin >= 0 && cols >= 0 &&
                   col_begin + cols <= all_cols && out_stride >= cols,
               fmt::format("block [{}, +{}) x [{}, +{}) of {} [{} x {}]", row_begin, rows, col_begin, cols, info.name,
                           all_rows, all_cols));
  const bool f32 = info.dtype == "F32", bf16 = info.dtype == "BF16";
  if (!f32 && !bf16 && info.dtype != "F16") {
    throw CheckpointError(fmt::format("{}: tensor '{}' has dtype {}; ppctl reads F32, F16 and BF16 (fix: "
                                      "convert the model to float32, float16 or bfloat16)",
                                      core::echo_label(path_.string()), core::echo_value(info.name),
                                      core::echo_value(info.dtype)));
  }
  if (rows == 0 || cols == 0) return 0;
  const size_t width = f32 ? 4 : 2;
  for (int64_t r = 0; r < rows; ++r) {
    // Only this row's run of the block is touched: a strided column range reads cols elements per row.
    const unsigned char* src = data(info) + (static_cast<size_t>((row_begin + r) * all_cols + col_begin)) * width;
    float* dst = out + r * out_stride;
    if (f32) {
      std::memcpy(dst, src, static_cast<size_t>(cols) * 4);  // little-endian host (x86-64, aarch64)
    } else {
      for (int64_t i = 0; i < cols; ++i) {
        const auto bits = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
        dst[i] = bf16 ? from_bits(static_cast<uint32_t>(bits) << 16) : half_to_float(bits);
      }
    }
  }
  return static_cast<uint64_t>(rows * cols) * width;
}

uint64_t safetensors_data_bytes(const std::vector<TensorToWrite>& tensors) {
  uint64_t bytes = 0;
  for (const auto& t : tensors) {
    uint64_t n = 4;
    for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
    bytes += n;
  }
  return bytes;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    PPCTL_ASSERT(names.insert(t.name).second, "duplicate tensor name " + t.name);
    uint64_t n = 4;
    for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
    PPCTL_ASSERT(n == 0 || t.values != nullptr, "no values for " + t.name);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data start 8-byte aligned
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);

  const auto tmp = std::filesystem::path(path.string() + fmt::format(".tmp.{}", ::getpid()));
  const auto fail = [&](const std::string& what, int error) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot {} {}: {} (fix: check the disk space and the folder's permissions)",
                            what, tmp.string(), std::strerror(error)));
  };
  {
    Fd file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (file.fd < 0) fail("create", errno);
    const auto write_all = [&](const void* data, size_t left) {
      const char* p = static_cast<const char*>(data);
      while (left > 0) {
        const ssize_t n = ::write(file.fd, p, std::min<size_t>(left, size_t{1} << 30));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write", errno);
        p += n;
        left -= static_cast<size_t>(n);
      }
    };
    write_all(prefix.data(), prefix.size());
    write_all(text.data(), text.size());
    for (const auto& t : tensors) {
      uint64_t n = 4;
      for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
      write_all(t.values, n);
    }
    if (::fsync(file.fd) != 0) fail("sync", errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename", errno);
  core::sync_directory(path.parent_path().empty() ? "." : path.parent_path());
}

}  // namespace ppctl::interop
