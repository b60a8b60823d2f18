// CRC-32/ISO-HDLC (zlib's crc32: polynomial 0x04C11DB7 reflected, initial value and final xor
// 0xFFFFFFFF; crc32("123456789") = 0xCBF43926), the checksum of every part of an episode store
// (docs/MEMORY.md). Table-driven, slicing by 16: the same value as a byte-at-a-time CRC (boost's
// crc_32_type), about ten times the speed, which is what a store's open time is made of.
#pragma once

#include <cstddef>
#include <cstdint>

namespace infer::memory {

uint32_t crc32(const uint8_t* p, size_t n);

}  // namespace infer::memory
