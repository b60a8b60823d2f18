// 8-bit codes of association key parts, and the integer dots recall's first pass scores with
// (recall_select.h). A part x of D floats is coded as x = s c + r, c in [-127, 127], s = max|x|
// / 127, with ||s c|| and ||r|| kept: a dot computed from the codes, exact in integers, then
// bounds the fp32 dot (recall_select.cpp says how), at a quarter of the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace infer::memory {

// What bounds the error of one coded part.
struct PartCode {
  float scale = 0;       // s
  float coded_norm = 0;  // ||s c||, rounded up
  float err_norm = 0;    // ||x - s c||, rounded up
};

// Keys are stored as c + 128 (unsigned: the first operand of the CPU's u8 x s8 dot), queries as
// c (signed).
PartCode code_key_part(const float* x, size_t D, uint8_t* out);
PartCode code_query_part(const float* x, size_t D, int8_t* out);

// keys: n keys of `subs` parts, each D codes (c + 128), contiguous; query: `parts` parts of D
// codes. raw[(k * parts + p) * subs + s] = Σ_i (c_key + 128) c_query over part s of key k and
// part p of the query (subtract 128 Σ_i c_query for the dot of the codes). Exact integers (D at
// most kMaxCodedDims), so every path gives the same numbers.
inline constexpr size_t kMaxCodedDims = 65536;
void coded_dots(const uint8_t* keys, size_t n, size_t subs, const int8_t* query, size_t parts,
                size_t D, int32_t* raw);

// The portable loop (tests compare the fast path with it).
void coded_dots_base(const uint8_t* keys, size_t n, size_t subs, const int8_t* query,
                     size_t parts, size_t D, int32_t* raw);

}  // namespace infer::memory
