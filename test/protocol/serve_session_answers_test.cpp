// The --serve session's answers (PROTOCOL.md §4.13, §5, §8): in the frames' order, APPENDED before
// prefill, a fixed cache's refusals and engine errors as ERROR frames of the requests they belong to.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "protocol/encode.h"
#include "protocol/serve_session.h"
#include "test/protocol/serve_session_driver.h"

namespace infer::protocol {
namespace {

using serve_test::commands_of;
using serve_test::Driver;
using serve_test::generate;
using serve_test::only;

TEST(ServeSession, AnswersKeepTheFramesOrderAndAppendedDoesNotWaitForPrefill) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5, 6, 7}});
  d.send(3, StatsRequest{});
  d.send(4, TraceMark{"m"});
  d.send(5, AppendIds{{100}});  // rejected: outside the vocabulary
  d.send(6, StatsRequest{});
  EXPECT_TRUE(d.take_frames().empty());  // all wait for the APPENDED before them
  d.appended(1, 3, 3);
  const auto frames = d.take_frames();
  EXPECT_EQ(d.take_opcodes(), (std::vector<std::pair<Opcode, uint32_t>>{}));
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(std::get<Appended>(frames[0].message), (Appended{3, 3}));
  EXPECT_EQ(std::get<Stats>(frames[1].message).pos, 3u);
  EXPECT_EQ(std::get<TraceMarkAck>(frames[2].message).label, "m");
  EXPECT_EQ(std::get<ErrorFrame>(frames[3].message).code, WireError::kIdOutOfRange);
  EXPECT_EQ(frames[4].request_id, 6u);
  d.turn_end(1, 3);  // the prefill is done: nothing more to answer
  EXPECT_TRUE(d.take_frames().empty());
  d.send(7, TraceMark{"idle"});  // nothing waits: at once
  EXPECT_EQ(only<TraceMarkAck>(d.take_frames()).label, "idle");
}

// A fixed cache that refuses an append whole: its ERROR carries the frame's request id and opcode
// in place of APPENDED, and a GENERATE sent before the refusal was known gets BAD_VALUE, no DONE.
TEST(ServeSession, ARefusedAppendIsAnErrorOfItsFrameAndLeavesTheContextEmpty) {
  Driver d;
  d.handshake();
  d.send(2, AppendIds{{5, 6, 7}});
  d.send(3, generate(4));  // pipelined behind it: the reader thinks the context has tokens
  EXPECT_EQ(d.take_commands().size(), 2u);
  d.session().engine_error(EngineError{EngineError::kContextFull, "the context would hold 3"},
                           d.out());
  EXPECT_TRUE(d.take_frames().empty());  // held for the turn it belongs to
  d.turn_end(1, 0);
  const auto refused = d.take_frames();
  const ErrorFrame& e = only<ErrorFrame>(refused);
  EXPECT_EQ(e.code, WireError::kContextFull);
  EXPECT_EQ(e.opcode, uint16_t(Opcode::kAppendIds));
  EXPECT_EQ(refused[0].request_id, 2u);
  d.session().engine_error(EngineError{EngineError::kEmptyContext, "the context is empty"},
                           d.out());
  d.turn_end(2, 0, DoneReason::kError);
  const auto gen = d.take_frames();
  const ErrorFrame& g = only<ErrorFrame>(gen);  // no DONE
  EXPECT_EQ(g.code, WireError::kBadValue);
  EXPECT_EQ(g.opcode, uint16_t(Opcode::kGenerate));
  EXPECT_EQ(gen[0].request_id, 3u);
  d.send(4, generate(4));  // now known at once: the context is empty
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kBadValue);
  EXPECT_TRUE(d.take_commands().empty());
}

// An engine failure during a generation: ERROR ENGINE for its request, then DONE `error`.
TEST(ServeSession, AnEngineFailureDuringAGenerationIsAnErrorThenDone) {
  Driver d;
  d.start_generating(4);
  d.token(2, 11, 1);
  d.session().engine_error(EngineError{EngineError::kEngine, "device lost"}, d.out());
  d.turn_end(2, 2, DoneReason::kError);
  const auto frames = d.take_frames();
  ASSERT_EQ(frames.size(), 3u);
  const ErrorFrame& e = std::get<ErrorFrame>(frames[1].message);
  EXPECT_EQ(e.code, WireError::kEngine);
  EXPECT_EQ(frames[1].request_id, 3u);
  EXPECT_EQ(e.opcode, uint16_t(Opcode::kGenerate));
  const Done& done = std::get<Done>(frames[2].message);
  EXPECT_EQ(done.reason, DoneReason::kError);
  EXPECT_EQ(done.pos, 2u);
}

TEST(ServeSession, RejectedFramesAreAnsweredWithErrorsAndChangeNothing) {
  Driver d;
  d.send(3, AppendIds{{1}});  // before HELLO
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kOutOfOrder);
  d.handshake();
  d.send(4, generate(2));  // empty context
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kBadValue);
  d.send(5, AppendIds{{1, 100}});  // outside the vocabulary
  EXPECT_EQ(only<ErrorFrame>(d.take_frames()).code, WireError::kIdOutOfRange);
  EXPECT_TRUE(d.take_commands().empty());
}


// --serve --system: every context opens with the server's system turn, so STATS counts it, a
// GENERATE needs no append first, and a RESET brings it back rather than an empty context.
TEST(ServeSession, APreambleOpensEveryContext) {
  Driver d;
  d.session().set_preamble(11);
  d.handshake();
  d.send(2, StatsRequest{});
  EXPECT_EQ(only<Stats>(d.take_frames()).pos, 11u);
  d.send(3, generate(2));
  EXPECT_TRUE(d.take_frames().empty());  // accepted: no error
  ASSERT_EQ(commands_of<GenerateCommand>(d.take_commands()).size(), 1u);
  d.token(1, 7, 11);
  d.turn_end(1, 12);
  d.take_frames();
  d.send(4, Reset{});
  d.reset_done();
  d.take_frames();
  d.send(5, StatsRequest{});
  EXPECT_EQ(only<Stats>(d.take_frames()).pos, 11u);
  d.send(6, generate(2));  // still not empty after the reset
  EXPECT_TRUE(d.take_frames().empty());
  // Without a preamble the same GENERATE after a reset is refused.
  Driver bare;
  bare.handshake();
  bare.send(2, Reset{});
  bare.reset_done();
  bare.take_frames();
  bare.send(3, generate(2));
  EXPECT_EQ(only<ErrorFrame>(bare.take_frames()).code, WireError::kBadValue);
}

}  // namespace
}  // namespace infer::protocol
