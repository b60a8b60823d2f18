// Integer codes of association key parts, and the integer dots recall's first pass scores with
// (recall_select.h). A part x of D floats is coded as x = s c + r, c integers in [-L, L] with
// L = code_limit(D) (so that any dot of two coded parts fits in int32), s = max|x| / L, with
// ||s c|| and ||r|| kept: a dot computed from the codes, exact in integers, then bounds the fp32
// dot (recall_select.cpp says how). Codes are 16 bits: half the bytes of the fp32 key, and an
// error small enough (|r| ~ |x| sqrt(D / 12) / L) that few keys need rescoring; 8-bit codes left
// a bound of ~0.014 on the association, wider than the spread of a store's near-ties.
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

// The largest code for parts of D floats: D L^2 < 2^31. 0 when D is too large to code.
int32_t code_limit(size_t D);

// Codes x [D] into out [D].
PartCode code_part(const float* x, size_t D, int16_t* out);

// keys: n keys of `subs` parts, each D codes, contiguous; query: `parts` parts of D codes.
// dots[(k * parts + p) * subs + s] = Σ_i c_key c_query over part s of key k and part p of the
// query. Exact integers, so every path gives the same numbers.
void coded_dots(const int16_t* keys, size_t n, size_t subs, const int16_t* query, size_t parts,
                size_t D, int32_t* dots);

// The portable loop (tests compare the fast path with it).
void coded_dots_base(const int16_t* keys, size_t n, size_t subs, const int16_t* query,
                     size_t parts, size_t D, int32_t* dots);

}  // namespace infer::memory
