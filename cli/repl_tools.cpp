// The REPL's PTY and interrupt commands. A PTY's command runs as `sh -c 'exec CMD'` (the shell
// parses quotes, then the program takes its place). Attaching puts the terminal in raw mode and
// relays keys and output until Ctrl-] (the telnet and docker habit); waits are bounded polls of
// 50 ms, so the REPL stays responsive and nothing spins.
#include "cli/repl_tools.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "actors/interrupt_injection.h"

namespace infer::cli {
namespace {

constexpr char kDetachKey = 0x1d;     // Ctrl-]
constexpr size_t kShownBytes = 4096;  // of a PTY's past output, on attach and in pipe mode

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// The first word of S, and S after it (trimmed).
std::pair<std::string_view, std::string_view> split_word(std::string_view s) {
  s = trim(s);
  size_t end = 0;
  while (end < s.size() && s[end] != ' ' && s[end] != '\t') ++end;
  return {s.substr(0, end), trim(s.substr(end))};
}

std::optional<uint64_t> parse_id(std::string_view s) {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

ToolCommandResult refuse(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "infer: %s\n", message.c_str());
  return {false, false};
}

std::string source_text(const tools::InterruptSource& s) {
  return std::string(tools::source_kind_name(s.kind)) + " " + std::to_string(s.id);
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n <= 0) return;
    bytes.remove_prefix(size_t(n));
  }
}

}  // namespace

Result<std::unique_ptr<ReplTools>> ReplTools::open(const std::string& root) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--tools " + root + ": not an existing directory");
  }
  std::unique_ptr<ReplTools> t(new ReplTools());
  INFER_TRY(t->ptys_, tools::PtySet::create(root, {}, t->adapter_.callback()));
  t->adapter_.attach(t->ptys_.get());
  t->timer_ = std::thread([p = t.get()] { p->interrupts_.run_timer(); });
  return t;
}

ReplTools::~ReplTools() {
  interrupts_.stop_timer();
  if (timer_.joinable()) timer_.join();
}

actors::BoundaryInput ReplTools::injection(const Tokenizer& tok) {
  return actors::interrupt_injection(interrupts_, tok);
}

void ReplTools::report(std::FILE* out) {
  for (const tools::InterruptEvent& e : interrupts_.take_events()) {
    if (tracer_ != nullptr) {
      const int64_t at_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(e.at.time_since_epoch()).count();
      tracer_->span("interrupts", tools::interrupt_event_name(e.kind), at_ns, at_ns, int64_t(e.id));
    }
    const std::string id = std::to_string(e.id);
    if (e.kind == tools::InterruptEventKind::kRaised) {
      std::fprintf(
          out, "[interrupt %s from %s: new output, %llu bytes: /ack %s, /snooze %s, /drop %s]\n",
          id.c_str(), source_text(e.source).c_str(), (unsigned long long)e.text_bytes, id.c_str(),
          id.c_str(), id.c_str());
    } else {
      std::fprintf(out, "[interrupt %s from %s %s, %llu bytes]\n", id.c_str(),
                   source_text(e.source).c_str(), tools::interrupt_event_name(e.kind),
                   (unsigned long long)e.text_bytes);
    }
  }
  std::fflush(out);
}

void ReplTools::list_interrupts(std::FILE* out) {
  const auto live = interrupts_.list();
  if (live.empty()) std::fputs("(no interrupts waiting)\n", out);
  for (const tools::InterruptInfo& i : live) {
    std::string when;
    if (i.until_turn_end) when = " until the turn ends";
    if (i.wake_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *i.wake_at - tools::InterruptSet::Clock::now());
      when = " for " + std::to_string(std::max<int64_t>(0, left.count()) / 1000) + " s more";
    }
    std::fprintf(out, "interrupt %llu  %s  %s%s  %llu bytes (%llu dropped, %llu bursts)  \"%s\"\n",
                 (unsigned long long)i.id, source_text(i.source).c_str(),
                 tools::interrupt_state_name(i.state), when.c_str(),
                 (unsigned long long)i.text_bytes, (unsigned long long)i.dropped_bytes,
                 (unsigned long long)i.bursts, i.preview.c_str());
  }
}

ToolCommandResult ReplTools::run(std::string_view line, std::FILE* out, AttachIo io) {
  report(out);  // what happened before the command, first
  const auto [name, args] = split_word(line);
  ToolCommandResult done;
  if (name == "/pty") {
    done = pty_command(args, out, io);
  } else if (name == "/interrupts") {
    list_interrupts(out);
  } else {
    const auto [id_text, rest] = split_word(args);
    const std::optional<uint64_t> id = parse_id(id_text);
    if (!id) return refuse(std::string(name) + " takes an interrupt id (see /interrupts)");
    Result<void> r;
    if (name == "/ack") {
      if (!rest.empty()) return refuse("/ack takes one interrupt id");
      r = interrupts_.ack(*id);
      if (r)
        std::fprintf(out, "[interrupt %llu acked: the model goes on with it]\n",
                     (unsigned long long)*id);
      done.continue_turn = r.ok();
    } else if (name == "/drop") {
      if (!rest.empty()) return refuse("/drop takes one interrupt id");
      r = interrupts_.drop(*id);
    } else {  // /snooze
      std::optional<std::chrono::milliseconds> delay;
      if (!rest.empty()) {
        double s = 0;
        const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), s);
        if (ec != std::errc() || p != rest.data() + rest.size() || !(s > 0) || s > 86400) {
          return refuse("/snooze N [seconds]: seconds must be a number above 0 (at most a day)");
        }
        delay = std::chrono::milliseconds(std::max<int64_t>(1, int64_t(s * 1000)));
      }
      r = interrupts_.snooze(*id, delay);
    }
    if (!r) return refuse(r.error().message);
  }
  report(out);  // the transition the command made, at once
  return done;
}

ToolCommandResult ReplTools::pty_command(std::string_view args, std::FILE* out, AttachIo io) {
  const auto [first, rest] = split_word(args);
  if (first.empty()) {
    const auto all = ptys_->list();
    if (all.empty()) std::fputs("(no PTYs: /pty open CMD)\n", out);
    for (const tools::PtyInfo& p : all) {
      std::string argv;
      for (const std::string& a : p.argv) argv += (argv.empty() ? "" : " ") + a;
      std::fprintf(out, "pty %u  %s  pid %d  %ux%u  %llu bytes out  %s", p.id,
                   p.status.running ? "running" : "ended", int(p.pid), p.cols, p.rows,
                   (unsigned long long)p.raw_end, argv.c_str());
      if (!p.status.running)
        std::fprintf(out, "  %s", tools::pty_exit_line(p.status).c_str());
      else
        std::fputs("\n", out);
    }
    return {};
  }
  if (first == "open") {
    if (rest.empty()) return refuse("/pty open CMD: which command?");
    tools::PtyOpenRequest req;
    req.argv = {"sh", "-c", "exec " + std::string(rest)};
    winsize ws{};
    if (::ioctl(io.out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
      req.rows = ws.ws_row;
      req.cols = ws.ws_col;
    }
    Result<tools::PtyId> id = ptys_->open(req);
    if (!id) return refuse("/pty open: " + id.error().message);
    std::fprintf(out, "[pty %u: %.*s; /pty %u attaches]\n", *id, int(rest.size()), rest.data(),
                 *id);
    return {};
  }
  if (first == "close") {
    const std::optional<uint64_t> id = parse_id(rest);
    if (!id || *id > UINT32_MAX) return refuse("/pty close takes a PTY id (see /pty)");
    if (Result<void> r = ptys_->close(tools::PtyId(*id)); !r) return refuse(r.error().message);
    std::fprintf(out, "[pty %llu closed]\n", (unsigned long long)*id);
    return {};
  }
  const std::optional<uint64_t> id = parse_id(first);
  if (!id || *id > UINT32_MAX) {
    return refuse("/pty: open CMD, close N, N (attach) or N TEXT; not \"" + std::string(first) +
                  "\"");
  }
  if (!rest.empty()) {
    if (Result<void> r = ptys_->write(tools::PtyId(*id), std::string(rest) + "\n"); !r) {
      return refuse(r.error().message);
    }
    return {};
  }
  return attach(tools::PtyId(*id), out, io);
}

ToolCommandResult ReplTools::attach(tools::PtyId id, std::FILE* out, AttachIo io) {
  Result<tools::PtyStatus> status = ptys_->status(id);
  if (!status) return refuse(status.error().message);
  if (!::isatty(io.in_fd)) {  // pipe mode: the recent text, no keys
    uint64_t from = 0;
    for (const tools::PtyInfo& p : ptys_->list()) {
      if (p.id == id) from = p.text_end > kShownBytes ? p.text_end - kShownBytes : 0;
    }
    Result<tools::PtyRead> r = ptys_->read_text(id, from, kShownBytes);
    if (!r) return refuse(r.error().message);
    std::fprintf(out, "%s%s%s", r->bytes.c_str(), r->partial_line.c_str(),
                 r->partial_line.empty() ? "" : "\n");
    return {};
  }
  uint64_t next = 0;
  for (const tools::PtyInfo& p : ptys_->list()) {
    if (p.id == id) next = p.raw_end > kShownBytes ? p.raw_end - kShownBytes : 0;
  }
  std::fflush(out);
  termios saved{};
  const bool raw = ::tcgetattr(io.in_fd, &saved) == 0;
  if (raw) {
    termios t = saved;
    ::cfmakeraw(&t);
    ::tcsetattr(io.in_fd, TCSANOW, &t);
  }
  winsize ws{};
  if (::ioctl(io.out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    (void)ptys_->resize(id, ws.ws_row, ws.ws_col);
  }
  write_all(io.out_fd, "[attached to pty " + std::to_string(id) + "; Ctrl-] returns]\r\n");
  std::string ended;
  for (bool attached = true; attached;) {
    Result<tools::PtyRead> r = ptys_->read_raw(id, next, size_t(64) << 10);
    if (!r) {
      ended = r.error().message;
      break;
    }
    write_all(io.out_fd, r->bytes);
    next = r->next;
    if (!r->status.running && next >= r->end) {
      ended = tools::pty_exit_line(r->status);  // "[exited with status 0]\n"
      ended = ended.substr(1, ended.size() - 3);
      break;
    }
    pollfd p{io.in_fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(io.in_fd, buf, sizeof buf);
    if (n <= 0) break;
    std::string_view keys(buf, size_t(n));
    if (const size_t stop = keys.find(kDetachKey); stop != std::string_view::npos) {
      keys = keys.substr(0, stop);
      attached = false;
    }
    if (!keys.empty()) (void)ptys_->write(id, keys);
  }
  if (raw) ::tcsetattr(io.in_fd, TCSANOW, &saved);
  write_all(io.out_fd, "\r\n[pty " + std::to_string(id) + ": " +
                           (ended.empty() ? std::string("detached") : ended) + "]\n");
  return {};
}

}  // namespace infer::cli
