// CRC-32C, one table lookup per byte (see crc32c.hpp).
#include "interop/crc32c.hpp"

#include <array>

namespace ppctl::interop {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli 0x1EDC6F41, bit-reversed

/// Entry b: the CRC register after shifting byte b through eight steps of the polynomial division.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPolynomial : r >> 1;
    table[b] = r;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

}  // namespace

uint32_t crc32c(std::string_view bytes, uint32_t previous) {
  uint32_t r = ~previous;
  for (const char c : bytes) r = kTable[(r ^ static_cast<unsigned char>(c)) & 0xFFu] ^ (r >> 8);
  return ~r;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

}  // namespace ppctl::interop
