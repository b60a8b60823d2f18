// INFER_CHECK: our own bugs (a shape mismatch, a slot out of range) abort with file and line.
// INFER_DCHECK compiles out of release builds, for the hot loop.
#pragma once

#include <cstdio>
#include <cstdlib>

#define INFER_CHECK(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond)) [[unlikely]] {                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                         \
      std::fputc('\n', stderr);                                                  \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

#ifdef NDEBUG
#define INFER_DCHECK(cond, ...) \
  do {                          \
  } while (0)
#else
#define INFER_DCHECK(cond, ...) INFER_CHECK(cond, __VA_ARGS__)
#endif
