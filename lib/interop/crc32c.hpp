// CRC-32C (Castagnoli), the checksum of TFRecord framing (TensorBoard event files). Debian 12 packages
// no C++ CRC-32C library, so this is a small table-driven one. Torch-free.
#pragma once

#include <cstdint>
#include <string_view>

namespace ppctl::interop {

/// CRC-32C of `bytes`: the reflected Castagnoli polynomial 0x82F63B78, initial value and final xor
/// 0xFFFFFFFF, one 256-entry table, one byte per step (RFC 3720, iSCSI, section 12.1 and appendix
/// B.4). `crc32c("123456789")` is the published check value 0xE3069283. `previous` continues a
/// checksum over bytes split in pieces: crc32c(b, crc32c(a)) == crc32c(a + b).
uint32_t crc32c(std::string_view bytes, uint32_t previous = 0);

/// The masked form TFRecord stores: rotate `crc` right by 15 bits and add 0xA282EAD8 (mod 2^32), as
/// TensorFlow's tensorflow/core/lib/hash/crc32c.h `Mask` does (a CRC of data holding CRCs is weak).
uint32_t mask_crc32c(uint32_t crc);

}  // namespace ppctl::interop
