// ChromeTrace: the JSON array form of the trace-event format, one event per line. Strings are
// the tracer's literals, escaped anyway so that the file is always valid JSON.
#include "actors/chrome_trace.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>

namespace infer::actors {
namespace {

void append_json_string(std::string& out, const char* s) {
  out += '"';
  for (; *s != '\0'; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

// ns as µs with three decimals: exact, so that nested spans stay nested in the file.
void append_us(std::string& out, int64_t ns) {
  if (ns < 0) ns = 0;
  char num[32];
  std::snprintf(num, sizeof num, "%" PRId64 ".%03d", ns / 1000, int(ns % 1000));
  out += num;
}

}  // namespace

Result<std::unique_ptr<ChromeTrace>> ChromeTrace::open(const std::filesystem::path& path,
                                                       int64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return make_error(ErrorCode::kIo, "--trace: cannot write " + path.string() + ": " +
                                          std::strerror(errno));
  }
  return std::unique_ptr<ChromeTrace>(new ChromeTrace(f, max_bytes));
}

ChromeTrace::ChromeTrace(std::FILE* file, int64_t max_bytes)
    : file_(file), max_bytes_(max_bytes), origin_ns_(steady_ns()) {
  buf_ = "[\n";
  std::string meta = R"({"name":"process_name","ph":"M","pid":)" + std::to_string(getpid()) +
                     R"(,"tid":0,"args":{"name":"infer"}})";
  append(meta);
}

ChromeTrace::~ChromeTrace() { close(); }

int ChromeTrace::tid_of(const char* actor) {
  for (size_t i = 0; i < actors_.size(); ++i) {
    if (actors_[i] == actor) return int(i) + 1;
  }
  actors_.emplace_back(actor);
  const int tid = int(actors_.size());
  std::string meta = R"({"name":"thread_name","ph":"M","pid":)" + std::to_string(getpid()) +
                     ",\"tid\":" + std::to_string(tid) + R"(,"args":{"name":)";
  append_json_string(meta, actor);
  meta += "}}";
  append(meta);
  // Tracks in order of first appearance (io, tokenizer, stream, ... in a session).
  append(R"({"name":"thread_sort_index","ph":"M","pid":)" + std::to_string(getpid()) +
         ",\"tid\":" + std::to_string(tid) + R"(,"args":{"sort_index":)" + std::to_string(tid) +
         "}}");
  return tid;
}

void ChromeTrace::span(const char* actor, const char* what, int64_t t0_ns, int64_t t1_ns,
                       int64_t arg) {
  std::string ev;
  ev.reserve(160);
  ev += R"({"name":)";
  append_json_string(ev, what);
  ev += R"(,"cat":)";
  append_json_string(ev, actor);
  ev += R"(,"ph":"X","ts":)";
  append_us(ev, t0_ns - origin_ns_);
  ev += R"(,"dur":)";
  append_us(ev, t1_ns - t0_ns);
  if (arg >= 0) ev += ",\"args\":{\"arg\":" + std::to_string(arg) + "}";
  emit(std::move(ev), actor);
}

void ChromeTrace::mark(const char* actor, const std::string& label, int64_t t_ns) {
  std::string ev = R"({"name":)";
  append_json_string(ev, label.c_str());
  ev += R"(,"cat":"mark","ph":"i","s":"t","ts":)";
  append_us(ev, t_ns - origin_ns_);
  emit(std::move(ev), actor);
}

void ChromeTrace::emit(std::string ev, const char* actor) {
  ev += R"(,"pid":)";
  ev += std::to_string(getpid());
  std::lock_guard lock(mu_);
  if (file_ == nullptr) return;
  if (written_ >= max_bytes_) {
    ++dropped_;
    return;
  }
  ev += ",\"tid\":" + std::to_string(tid_of(actor)) + '}';
  append(ev);
}

void ChromeTrace::append(const std::string& event) {
  if (!first_) buf_ += ",\n";
  first_ = false;
  buf_ += event;
  written_ += int64_t(event.size()) + 2;
  if (buf_.size() >= kFlushBytes) flush();
}

void ChromeTrace::flush() {
  // A failed write (disk full) loses events, never the session: tracing is best effort.
  if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), file_);
  buf_.clear();
}

void ChromeTrace::close() {
  std::lock_guard lock(mu_);
  if (file_ == nullptr) return;
  if (dropped_ > 0) {
    append(R"({"name":"trace truncated","ph":"i","s":"g","pid":)" + std::to_string(getpid()) +
           R"(,"tid":0,"ts":)" + std::to_string((steady_ns() - origin_ns_) / 1000) +
           R"(,"args":{"dropped_spans":)" + std::to_string(dropped_) + "}}");
  }
  buf_ += "\n]\n";
  flush();
  std::fclose(file_);
  file_ = nullptr;
}

int64_t ChromeTrace::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace infer::actors
