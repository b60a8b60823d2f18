// The Python reference client's codec against the C++ one, without a server: C++ writes every
// sample frame and a line describing each; protocol/python/test_codec.py must decode every frame
// to that line and re-encode it to the same bytes (PROTOCOL.md is the contract for both).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "protocol/encode.h"
#include "test/protocol/samples.h"

namespace infer::protocol {
namespace {

// The canonical line format test_codec.py renders too: NAME rid=N field=value..., fields in wire
// order; u32/u64 decimal, f32/f64 as their bits in hex, text as hex bytes, id lists decimal.
struct Line {
  std::string s;
  // append() rather than "literal" + string: GCC 12 at -O3 warns falsely (-Wrestrict) on that.
  Line(const char* name, uint32_t rid) : s(name) { s.append(" rid=").append(std::to_string(rid)); }
  Line() : record_(true) {}  // one record of a record list
  bool record_ = false;
  Line& u(const char* k, uint64_t v) { return add(k, std::to_string(v)); }
  Line& f32(const char* k, float v) {
    char b[16];
    std::snprintf(b, sizeof b, "f32:%08" PRIx32, std::bit_cast<uint32_t>(v));
    return add(k, b);
  }
  Line& f64(const char* k, double v) {
    char b[24];
    std::snprintf(b, sizeof b, "f64:%016" PRIx64, std::bit_cast<uint64_t>(v));
    return add(k, b);
  }
  Line& text(const char* k, const std::string& v) {
    std::string hex = "s:";
    char b[4];
    for (unsigned char c : v) {
      std::snprintf(b, sizeof b, "%02x", c);
      hex += b;
    }
    return add(k, hex);
  }
  // A list of strings (PTY_OPEN argv): argv: then each as hex bytes, joined by ','.
  Line& strs(const char* k, const std::vector<std::string>& v) {
    std::string out = "argv:";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';
      out += Line().text("x", v[i]).s.substr(4);  // "x=s:" then the hex
    }
    return add(k, out);
  }
  Line& ids(const char* k, const std::vector<uint32_t>& v) {
    std::string out = "ids:";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(v[i]);
    }
    return add(k, out);
  }
  // Records: recs: then records joined by '|', each record's fields (as above) by ','.
  Line& recs(const char* k, const std::vector<Line>& records) {
    std::string out = "recs:";
    for (size_t i = 0; i < records.size(); ++i) {
      if (i > 0) out += '|';
      out += records[i].s;
    }
    return add(k, out);
  }
  Line& add(const char* k, const std::string& v) {
    if (s.empty()) {  // a record's fields: "k=v,k=v"
      s.append(k).append("=").append(v);
      return *this;
    }
    if (record_) {
      s.append(",").append(k).append("=").append(v);
      return *this;
    }
    s.append(" ").append(k).append("=").append(v);
    return *this;
  }
};

std::string describe(const ClientMessage& msg, uint32_t rid) {
  const char* name = opcode_name(static_cast<uint16_t>(opcode_of(msg)));
  Line l(name, rid);
  if (auto* m = std::get_if<Hello>(&msg)) l.u("version", m->version).text("client_name", m->client_name);
  if (auto* m = std::get_if<AppendText>(&msg)) l.text("text", m->text);
  if (auto* m = std::get_if<AppendIds>(&msg)) l.ids("ids", m->ids);
  if (auto* m = std::get_if<Generate>(&msg)) {
    l.u("max_tokens", m->max_tokens).u("flags", m->flags).u("seed", m->seed);
    l.f32("temperature", m->temperature).f32("top_p", m->top_p).u("top_k", m->top_k);
    l.ids("stop_ids", m->stop_ids);
  }
  if (auto* m = std::get_if<TraceMark>(&msg)) l.text("label", m->label);
  if (auto* m = std::get_if<MemoryRecall>(&msg)) l.text("text", m->text);
  if (auto* m = std::get_if<MemoryForget>(&msg)) l.u("episode_id", m->episode_id);
  if (auto* m = std::get_if<MemoryQuery>(&msg)) l.u("first", m->first).u("max_count", m->max_count);
  if (auto* m = std::get_if<MemoryWatch>(&msg)) l.u("on", m->on);
  if (auto* m = std::get_if<ToolDeclare>(&msg)) l.text("json", m->json);
  if (auto* m = std::get_if<ToolResult>(&msg)) {
    l.u("call_id", m->call_id).u("status", uint32_t(m->status)).text("text", m->text);
  }
  if (auto* m = std::get_if<ToolEvents>(&msg)) l.u("mask", m->mask);
  if (auto* m = std::get_if<PtyOpen>(&msg)) {
    l.u("rows", m->rows).u("cols", m->cols).u("flags", m->flags).text("cwd", m->cwd);
    l.strs("argv", m->argv);
  }
  if (auto* m = std::get_if<PtyWrite>(&msg)) {
    l.u("pty_id", m->pty_id).u("mode", uint32_t(m->mode)).text("data", m->data);
  }
  if (auto* m = std::get_if<PtyResize>(&msg)) l.u("pty_id", m->pty_id).u("rows", m->rows).u("cols", m->cols);
  if (auto* m = std::get_if<PtyClose>(&msg)) l.u("pty_id", m->pty_id);
  if (auto* m = std::get_if<PtyRead>(&msg)) {
    l.u("pty_id", m->pty_id).u("view", uint32_t(m->view)).u("from", m->from);
    l.u("max_bytes", m->max_bytes);
  }
  if (auto* m = std::get_if<InterruptAction>(&msg)) {
    l.u("interrupt_id", m->interrupt_id).u("action", uint32_t(m->action));
    l.u("snooze_ms", m->snooze_ms);
  }
  if (auto* m = std::get_if<InterruptRaise>(&msg)) l.u("channel", m->channel).text("text", m->text);
  return l.s;
}

void describe_tools(const ServerMessage& msg, Line& l) {
  if (auto* m = std::get_if<ToolDeclared>(&msg)) l.u("n_tools", m->n_tools);
  if (auto* m = std::get_if<ToolCall>(&msg)) {
    l.u("call_id", m->call_id).text("name", m->name).text("arguments", m->arguments);
  }
  if (auto* m = std::get_if<PtyOpened>(&msg)) l.u("pty_id", m->pty_id).u("pid", m->pid);
  if (auto* m = std::get_if<InterruptRaised>(&msg)) l.u("interrupt_id", m->interrupt_id);
  if (auto* m = std::get_if<PtyData>(&msg)) {
    l.u("pty_id", m->pty_id).u("view", uint32_t(m->view)).u("from", m->from).u("next", m->next);
    l.u("end", m->end).u("skipped", m->skipped).u("state", uint32_t(m->state)).u("code", m->code);
    l.text("partial_line", m->partial_line).text("data", m->data);
  }
  const auto* ev = std::get_if<ToolEvent>(&msg);
  if (ev == nullptr) return;
  l.u("kind", uint32_t(ev->kind()));
  if (auto* e = std::get_if<ToolRanEvent>(&ev->event)) {
    l.u("call_id", e->call_id).u("status", uint32_t(e->status)).u("elapsed_ms", e->elapsed_ms);
    l.u("pos", e->pos).u("n_tokens", e->n_tokens).u("client", e->client).text("name", e->name);
  }
  if (auto* e = std::get_if<PtyOutputEvent>(&ev->event)) {
    l.u("pty_id", e->pty_id).u("raw_from", e->raw_from).u("text_from", e->text_from);
    l.text("raw", e->raw).text("text", e->text);
  }
  if (auto* e = std::get_if<PtyStateEvent>(&ev->event)) {
    l.u("pty_id", e->pty_id).u("state", uint32_t(e->state)).u("code", e->code);
  }
  if (auto* e = std::get_if<InterruptEvent>(&ev->event)) {
    l.u("interrupt_id", e->interrupt_id).u("state", uint32_t(e->state));
    l.u("source", uint32_t(e->source)).u("source_id", e->source_id).u("snooze_ms", e->snooze_ms);
    l.u("bytes", e->bytes).u("pos", e->pos).u("n_tokens", e->n_tokens);
  }
}

void describe_memory(const ServerMessage& msg, Line& l) {
  if (auto* m = std::get_if<MemoryRecalled>(&msg)) {
    std::vector<Line> rs;
    for (const RecalledEpisode& e : m->episodes) {
      Line r;
      r.u("episode_id", e.episode_id).u("n_tokens", e.n_tokens).f32("score", e.score);
      r.f32("association", e.association).f32("strength", e.strength).u("age_s", e.age_s);
      rs.push_back(r);
    }
    l.recs("episodes", rs);
  }
  if (auto* m = std::get_if<MemoryStored>(&msg)) {
    std::vector<Line> rs;
    for (const StoredEpisode& e : m->episodes) {
      Line r;
      r.u("episode_id", e.episode_id).u("pos0", e.pos0).u("n_tokens", e.n_tokens);
      rs.push_back(r);
    }
    l.recs("episodes", rs);
  }
  if (auto* m = std::get_if<MemoryForgotten>(&msg)) l.u("episode_id", m->episode_id);
  if (auto* m = std::get_if<MemoryList>(&msg)) {
    l.u("total", m->total);
    std::vector<Line> rs;
    for (const ListedEpisode& e : m->episodes) {
      Line r;
      r.u("episode_id", e.episode_id).u("pos0", e.pos0).u("n_tokens", e.n_tokens);
      r.f32("strength", e.strength).u("written_ms", e.written_ms).u("recalled_ms", e.recalled_ms);
      r.text("preview", e.preview);
      rs.push_back(r);
    }
    l.recs("episodes", rs);
  }
  if (auto* m = std::get_if<MemoryEvent>(&msg)) {
    l.u("kind", static_cast<uint32_t>(m->kind)).u("episode_id", m->episode_id).u("pos0", m->pos0);
    l.u("n_tokens", m->n_tokens).f32("score", m->score).f32("association", m->association);
    l.f32("strength", m->strength);
  }
}

std::string describe(const ServerMessage& msg, uint32_t rid) {
  const char* name = opcode_name(static_cast<uint16_t>(opcode_of(msg)));
  Line l(name, rid);
  if (auto* m = std::get_if<ServerHello>(&msg)) {
    l.u("version", m->version).u("vocab_size", m->vocab_size);
    l.u("max_payload_bytes", m->max_payload_bytes).u("max_generate_tokens", m->max_generate_tokens);
    l.u("context_tokens", m->context_tokens).ids("end_ids", m->end_ids);
    l.text("model_name", m->model_name);
  }
  if (auto* m = std::get_if<Token>(&msg)) {
    l.u("id", m->id).u("index", m->index).u("pos", m->pos).text("text", m->text);
  }
  if (auto* m = std::get_if<Gate>(&msg)) {
    l.u("decision", static_cast<uint32_t>(m->decision)).u("index", m->index);
    l.f32("entropy", m->entropy).f32("top_prob", m->top_prob).f32("eot_prob", m->eot_prob);
    l.f32("urgency", m->urgency).f32("cost_ms", m->cost_ms);
  }
  if (auto* m = std::get_if<Done>(&msg)) {
    l.u("reason", static_cast<uint32_t>(m->reason)).u("n_tokens", m->n_tokens).u("pos", m->pos);
    l.u("last_id", m->last_id).text("text", m->text);
  }
  if (auto* m = std::get_if<Stats>(&msg)) {
    l.u("pos", m->pos).u("kv_tokens", m->kv_tokens).u("prefill_tokens", m->prefill_tokens);
    l.u("decode_tokens", m->decode_tokens).u("generations", m->generations);
    l.f64("prefill_tok_s", m->prefill_tok_s).f64("decode_tok_s", m->decode_tok_s);
    l.u("uptime_ms", m->uptime_ms).u("flags", m->flags).u("queued_appends", m->queued_appends);
  }
  if (auto* m = std::get_if<ErrorFrame>(&msg)) {
    l.u("code", static_cast<uint16_t>(m->code)).u("opcode", m->opcode).text("message", m->message);
  }
  if (auto* m = std::get_if<TraceMarkAck>(&msg)) {
    l.u("server_time_ns", m->server_time_ns).text("label", m->label);
  }
  if (auto* m = std::get_if<Appended>(&msg)) l.u("pos", m->pos).u("n_tokens", m->n_tokens);
  describe_memory(msg, l);
  describe_tools(msg, l);
  return l.s;
}

class ProtocolPython : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("infer-protocol-py-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    for (const auto& [m, rid] : test::client_samples()) {
      encode(m, rid, frames_);
      lines_.push_back(describe(m, rid));
    }
    for (const auto& [m, rid] : test::server_samples()) {
      encode(m, rid, frames_);
      lines_.push_back(describe(m, rid));
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs test_codec.py on the frames and lines; returns its exit status.
  int run(const std::vector<uint8_t>& frames, const std::vector<std::string>& lines) {
    const auto bin = dir_ / "frames.bin", txt = dir_ / "frames.txt";
    std::ofstream(bin, std::ios::binary)
        .write(reinterpret_cast<const char*>(frames.data()), static_cast<std::streamsize>(frames.size()));
    std::ofstream out(txt);
    for (const auto& l : lines) out << l << '\n';
    out.close();
    std::string cmd = "'";
    cmd.append(INFER_PYTHON3).append("' '").append(INFER_PROTOCOL_PY_DIR);
    cmd.append("/test_codec.py' '").append(bin.string()).append("' '").append(txt.string());
    cmd.append("'");
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }

  std::filesystem::path dir_;
  std::vector<uint8_t> frames_;
  std::vector<std::string> lines_;
};

TEST_F(ProtocolPython, DecodesEveryFrameAndReencodesItByteForByte) {
  EXPECT_EQ(run(frames_, lines_), 0);
}

// The check above can fail: a changed field or a changed byte makes the script exit non-zero.
TEST_F(ProtocolPython, NoticesADifferentField) {
  auto lines = lines_;
  lines[5].replace(lines[5].find("max_tokens=200"), 14, "max_tokens=201");
  EXPECT_NE(run(frames_, lines), 0);
}

TEST_F(ProtocolPython, NoticesADifferentByte) {
  auto frames = frames_;
  frames[kHeaderBytes] ^= 0x01;  // HELLO's version 1 → 0: decodes fine, to another line
  EXPECT_NE(run(frames, lines_), 0);
}

}  // namespace
}  // namespace infer::protocol
