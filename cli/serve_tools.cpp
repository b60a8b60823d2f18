// ServeTools' frames (docs/PROTOCOL.md §4.21-§4.27): each checked against the tools' state and
// run at once (nothing here waits on the engine), answered or refused with the spec's code.
#include "cli/serve_tools.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "actors/interrupt_injection.h"
#include "base/check.h"
#include "cli/chat_turn.h"

namespace infer::cli {
namespace {

using protocol::ToolRefusal;
using protocol::WireError;

// PTY_DATA's partial line (§4.26).
constexpr size_t kMaxPartialLineBytes = 4096;

ToolRefusal refuse(WireError code, std::string message) { return {code, std::move(message)}; }

// A PTY call's error: what the set could not find or refused is the client's BAD_VALUE; a
// system failure (kIo) is `io_code` (ENGINE, or OUT_OF_ORDER for a write to a PTY whose
// terminal is gone).
ToolRefusal pty_refusal(const Error& e, WireError io_code = WireError::kEngine) {
  return refuse(e.code == ErrorCode::kIo ? io_code : WireError::kBadValue, e.message);
}

}  // namespace

ServeTools::ServeTools() : adapter_(interrupts_) {}

Result<std::unique_ptr<ServeTools>> ServeTools::open(const std::string& root) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--tools " + root + ": not an existing directory");
  }
  std::unique_ptr<ServeTools> t(new ServeTools());
  ServeTools* self = t.get();
  INFER_TRY(t->ptys_, tools::PtySet::create(
                          root, {}, [self](const tools::PtyEvent& e) { self->on_pty_event(e); }));
  t->adapter_.attach(t->ptys_.get());
  t->drained_.store(t->ptys_.get());
  t->timer_ = std::thread([self] { self->interrupts_.run_timer(); });
  return t;
}

ServeTools::~ServeTools() {
  interrupts_.stop_timer();
  if (timer_.joinable()) timer_.join();
  drained_.store(nullptr);
  ptys_.reset();  // ends and reaps every child while the adapter and queue still exist
}

actors::BoundaryInput ServeTools::injection(const Tokenizer& tok) {
  return actors::interrupt_injection(interrupts_, tok, [this](tools::InterruptId id, int64_t n) {
    std::lock_guard lock(q_mu_);
    injections_.emplace_back(id, n);
  });
}

protocol::ToolReply<protocol::ToolDeclared> ServeTools::declare(uint32_t,
                                                                const protocol::ToolDeclare& d) {
  Result<std::vector<protocol::DeclaredTool>> parsed = protocol::parse_tool_declarations(d.json);
  if (!parsed) return refuse(WireError::kBadValue, parsed.error().message);  // the parser read it
  std::vector<ToolDeclaration> tools;
  for (const protocol::DeclaredTool& t : *parsed) {
    nlohmann::json params = nlohmann::json::parse(t.parameters_json, nullptr, false);
    if (params.is_discarded()) return refuse(WireError::kBadValue, t.name + ": parameters");
    tools.push_back(ToolDeclaration{t.name, t.description, std::move(params)});
  }
  const size_t n = tools.size();
  if (Result<void> r = pipeline_->set_client_tools(tools); !r) {
    return refuse(WireError::kBadValue, r.error().message);
  }
  if (opening_.tokenizer != nullptr) {
    std::vector<int32_t> ids = system_turn_ids(*opening_.tokenizer, opening_.system_text,
                                               opening_.special, pipeline_->tool_declarations());
    if (int64_t(ids.size()) > opening_.max_tokens) {
      INFER_CHECK(pipeline_->set_client_tools(client_tools_).ok(), "the previous client tools");
      return refuse(WireError::kBadValue,
                    "the system turn declaring these tools would be " +
                        std::to_string(ids.size()) + " tokens; the KV ring's anchors hold " +
                        std::to_string(opening_.max_tokens) +
                        " (start the server with a larger --anchors)");
    }
    opening_ids_ = std::move(ids);
  }
  client_tools_ = std::move(tools);
  return protocol::ToolDeclared{uint32_t(n)};
}

std::optional<std::vector<int32_t>> ServeTools::opening_turn() {
  std::optional<std::vector<int32_t>> ids;
  ids.swap(opening_ids_);
  return ids;
}

protocol::ToolReply<protocol::ToolAck> ServeTools::result(uint32_t,
                                                          const protocol::ToolResult& r) {
  const auto it = calls_.find(r.call_id);
  if (it == calls_.end()) {
    return refuse(WireError::kBadValue,
                  "call " + std::to_string(r.call_id) + " was never sent as a TOOL_CALL");
  }
  if (it->second.state != CallState::kOut) {
    return refuse(WireError::kOutOfOrder,
                  "call " + std::to_string(r.call_id) + " was " +
                      (it->second.state == CallState::kAnswered ? "answered" : "cancelled") +
                      " already");
  }
  nlohmann::json value;
  if (r.status == protocol::ToolStatus::kError) {
    value = {{"error", r.text}};
  } else {
    value = nlohmann::json::parse(r.text, nullptr, false);  // the parser checked it is JSON
    if (value.is_discarded()) return refuse(WireError::kMalformed, "the result is not JSON");
    if (!value.is_object()) value = {{"value", std::move(value)}};
  }
  it->second.state = CallState::kAnswered;
  pipeline_->tool_result(r.call_id, actors::tool_json_text(value));
  return protocol::ToolAck{};
}

protocol::ToolReply<protocol::PtyOpened> ServeTools::pty_open(uint32_t,
                                                              const protocol::PtyOpen& o) {
  if (o.rows == 0 || o.cols == 0) {
    return refuse(WireError::kBadValue, std::to_string(o.rows) + " rows x " +
                                            std::to_string(o.cols) + " columns");
  }
  tools::PtyOpenRequest req;
  req.argv = o.argv;
  req.rows = o.rows;
  req.cols = o.cols;
  req.cwd = o.cwd;
  Result<tools::PtyId> id = ptys_->open(req);
  if (!id) return pty_refusal(id.error());
  pid_t pid = 0;
  for (const tools::PtyInfo& p : ptys_->list()) {
    if (p.id == *id) pid = p.pid;
  }
  return protocol::PtyOpened{*id, uint32_t(pid)};
}

protocol::ToolReply<protocol::ToolAck> ServeTools::pty_write(uint32_t,
                                                             const protocol::PtyWrite& w) {
  const Result<void> r = w.mode == protocol::PtyWriteMode::kKey ? ptys_->write_key(w.pty_id, w.data)
                                                               : ptys_->write(w.pty_id, w.data);
  if (!r) return pty_refusal(r.error(), WireError::kOutOfOrder);
  return protocol::ToolAck{};
}

protocol::ToolReply<protocol::ToolAck> ServeTools::pty_resize(uint32_t,
                                                              const protocol::PtyResize& r) {
  if (r.rows == 0 || r.cols == 0) {
    return refuse(WireError::kBadValue, std::to_string(r.rows) + " rows x " +
                                            std::to_string(r.cols) + " columns");
  }
  if (Result<void> done = ptys_->resize(r.pty_id, r.rows, r.cols); !done) {
    return pty_refusal(done.error());
  }
  return protocol::ToolAck{};
}

protocol::ToolReply<protocol::ToolAck> ServeTools::pty_close(uint32_t rid,
                                                             const protocol::PtyClose& c) {
  if (Result<void> r = ptys_->close(c.pty_id); !r) return pty_refusal(r.error());
  // `closed` is the id's last event, caused by this frame; the set's own kClosed is not told.
  protocol::PtyStateEvent closed{c.pty_id, protocol::PtyState::kClosed, 0};
  std::lock_guard lock(q_mu_);
  push_event(protocol::EngineToolEvent{protocol::ToolEvent{closed}, rid, 0});
  offsets_.erase(c.pty_id);
  return protocol::ToolAck{};
}

protocol::ToolReply<protocol::PtyData> ServeTools::pty_read(uint32_t,
                                                            const protocol::PtyRead& r) {
  const bool text = r.view == protocol::PtyView::kText;
  Result<tools::PtyRead> got = text ? ptys_->read_text(r.pty_id, r.from, r.max_bytes)
                                    : ptys_->read_raw(r.pty_id, r.from, r.max_bytes);
  if (!got) return pty_refusal(got.error());
  protocol::PtyData d;
  d.pty_id = r.pty_id;
  d.view = r.view;
  d.from = got->from;
  d.next = got->next;
  d.end = got->end;
  d.skipped = got->skipped;
  d.state = pty_state(got->status);
  d.code = pty_code(got->status);
  if (text) d.partial_line = got->partial_line.substr(0, kMaxPartialLineBytes);
  d.data = std::move(got->bytes);
  return d;
}

protocol::ToolReply<protocol::ToolAck> ServeTools::interrupt_action(
    uint32_t rid, const protocol::InterruptAction& a) {
  const uint64_t id = a.interrupt_id;
  // Acked and waiting for a boundary: the set would let a drop take it back, the protocol
  // does not (§4.27: nothing changes).
  for (const tools::InterruptInfo& i : interrupts_.list()) {
    if (i.id == id && i.state == tools::InterruptState::kAcked) {
      return refuse(WireError::kOutOfOrder, "interrupt " + std::to_string(id) +
                                                " is acked and waits to be written");
    }
  }
  action_cause_[id] = rid;
  Result<void> r;
  switch (a.action) {
    case protocol::InterruptActionKind::kAck: r = interrupts_.ack(id); break;
    case protocol::InterruptActionKind::kDrop: r = interrupts_.drop(id); break;
    case protocol::InterruptActionKind::kSnooze:
      snooze_ms_[id] = a.snooze_ms;
      r = a.snooze_ms == 0 ? interrupts_.snooze(id)
                           : interrupts_.snooze(id, std::chrono::milliseconds(a.snooze_ms));
      break;
  }
  if (r) return protocol::ToolAck{};
  action_cause_.erase(id);
  // Ids are given from 1 in order: one at most the highest seen was given and is done now.
  if (r.error().code == ErrorCode::kNotFound && (id == 0 || id > last_interrupt_id_)) {
    return refuse(WireError::kBadValue, "interrupt " + std::to_string(id) + " was never raised");
  }
  return refuse(WireError::kOutOfOrder, r.error().message);
}

protocol::ToolReply<protocol::InterruptRaised> ServeTools::interrupt_raise(
    uint32_t, const protocol::InterruptRaise& r) {
  Result<tools::InterruptId> id =
      interrupts_.raise({tools::SourceKind::kClient, r.channel}, r.text);
  if (!id) return refuse(WireError::kBadValue, id.error().message);
  last_interrupt_id_ = std::max(last_interrupt_id_, *id);
  return protocol::InterruptRaised{uint32_t(*id)};
}

}  // namespace infer::cli
