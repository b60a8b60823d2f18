// Framing (PROTOCOL.md §2): the 12-byte header and an incremental decoder that cuts a byte
// stream, fed in chunks of any size, into frames, holding at most one payload of at most
// max_payload_bytes and never allocating for a payload it rejects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "protocol/opcodes.h"

namespace infer::protocol {

struct FrameHeader {
  uint32_t payload_bytes = 0;
  uint16_t opcode = 0;
  uint16_t flags = 0;  // none defined in v1: must be 0 (PROTOCOL.md §2)
  uint32_t request_id = 0;
  bool operator==(const FrameHeader&) const = default;
};

void put_header(std::vector<uint8_t>& out, const FrameHeader& h);
FrameHeader read_header(const uint8_t* p);  // p: kHeaderBytes bytes

// One whole frame. `payload` points into the decoder or into the caller's input chunk: valid
// until the next call to FrameDecoder::next() or until that chunk goes away.
struct Frame {
  FrameHeader header;
  std::span<const uint8_t> payload;
};

// A header announced more than the limit. The decoder skips that many bytes (without storing
// them) and then reads the next header: the stream stays in step.
struct FrameTooLarge {
  FrameHeader header;
  uint32_t max_payload_bytes = 0;
  std::string message() const;
};

using DecodeEvent = std::variant<Frame, FrameTooLarge>;

class FrameDecoder {
 public:
  explicit FrameDecoder(uint32_t max_payload_bytes = kMaxPayloadBytes);

  // Consumes bytes from the front of `in` until one event is complete or `in` is empty. Call it
  // again with what is left of `in` until it returns nullopt; then feed the next chunk.
  std::optional<DecodeEvent> next(std::span<const uint8_t>& in);

  // True between frames: input that ends here ended cleanly (else WireError::kTruncated).
  bool at_boundary() const { return state_ == State::kHeader && have_ == 0; }
  // Bytes of the unfinished frame seen so far (header included) and of the whole frame.
  uint64_t partial_bytes() const;
  uint64_t partial_frame_bytes() const;
  // Capacity of the payload buffer: never above max_payload_bytes (what the fuzzer checks).
  size_t buffer_capacity() const { return payload_.capacity(); }

 private:
  enum class State { kHeader, kPayload, kSkip };
  uint32_t max_payload_bytes_;
  State state_ = State::kHeader;
  uint8_t header_bytes_[kHeaderBytes] = {};
  FrameHeader header_;
  size_t have_ = 0;       // bytes of the header (kHeader) or payload (kPayload, kSkip) so far
  std::vector<uint8_t> payload_;
};

}  // namespace infer::protocol
