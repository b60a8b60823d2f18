// Result<T> and Error: what the outside world can get wrong comes back as a value (STYLE.md, Errors).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace infer {

// From 1: CAF reads code 0 as "no error" when an ErrorCode crosses actors as a caf::error.
enum class ErrorCode : uint8_t {
  kInvalidArgument = 1,  // a bad option or value given by the user
  kNotFound,         // a missing file, tensor or key
  kIo,               // open/read/mmap failed
  kParse,            // malformed JSON, header or frame
  kUnsupported,      // well-formed but not something we run (model_type, dtype, rope type)
  kShape,            // a tensor or config value with the wrong size
  kVulkan,           // a Vulkan call failed
  kProtocol,         // a malformed or out-of-order protocol frame
  kInternal,         // should not happen; still reported, not crashed on
  kContextFull,      // a fixed KV cache (--no-ring) cannot take the tokens; nothing was added
  kEmptyContext,     // a generation with nothing to continue from
};

inline const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kParse: return "parse error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kShape: return "shape error";
    case ErrorCode::kVulkan: return "vulkan error";
    case ErrorCode::kProtocol: return "protocol error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kContextFull: return "context full";
    case ErrorCode::kEmptyContext: return "empty context";
  }
  return "error";
}

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// A T or an Error. Access to the wrong alternative is a bug in the caller and aborts.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { check_ok(); return std::get<0>(v_); }
  const T& value() const& { check_ok(); return std::get<0>(v_); }
  T&& value() && { check_ok(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    if (ok()) { std::fprintf(stderr, "Result::error() on a value\n"); std::abort(); }
    return std::get<1>(v_);
  }

 private:
  void check_ok() const {
    if (!ok()) {
      std::fprintf(stderr, "Result::value() on an error: %s\n", std::get<1>(v_).message.c_str());
      std::abort();
    }
  }
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
struct Ok {};
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Ok) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace infer

#define INFER_CONCAT_INNER(a, b) a##b
#define INFER_CONCAT(a, b) INFER_CONCAT_INNER(a, b)

// INFER_TRY(auto x, expr): binds the value of a Result or returns its Error from the caller.
#define INFER_TRY(decl, expr) INFER_TRY_IMPL(INFER_CONCAT(infer_try_, __LINE__), decl, expr)
#define INFER_TRY_IMPL(tmp, decl, expr)      \
  auto tmp = (expr);                         \
  if (!tmp.ok()) return tmp.error();         \
  decl = std::move(tmp).value()

// INFER_TRY_VOID(expr): returns the Error of a Result<void> from the caller.
#define INFER_TRY_VOID(expr)                                   \
  do {                                                         \
    auto infer_try_void_ = (expr);                             \
    if (!infer_try_void_.ok()) return infer_try_void_.error(); \
  } while (0)
