// The frame header and FrameDecoder (PROTOCOL.md §2, §6.1).
#include "protocol/frame.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "protocol/bytes.h"

namespace infer::protocol {

void put_header(std::vector<uint8_t>& out, const FrameHeader& h) {
  put_u32(out, h.payload_bytes);
  put_u16(out, h.opcode);
  put_u16(out, h.flags);
  put_u32(out, h.request_id);
}

FrameHeader read_header(const uint8_t* p) {
  return FrameHeader{get_u32(p), get_u16(p + 4), get_u16(p + 6), get_u32(p + 8)};
}

std::string FrameTooLarge::message() const {
  return "frame announces a payload of " + std::to_string(header.payload_bytes) +
         " bytes, the limit is " + std::to_string(max_payload_bytes) + "; payload skipped";
}

FrameDecoder::FrameDecoder(uint32_t max_payload_bytes) : max_payload_bytes_(max_payload_bytes) {
  INFER_CHECK(max_payload_bytes <= kMaxPayloadBytes, "decoder limit %u above the protocol's %u",
              max_payload_bytes, kMaxPayloadBytes);
}

uint64_t FrameDecoder::partial_bytes() const {
  return state_ == State::kHeader ? have_ : kHeaderBytes + have_;
}

uint64_t FrameDecoder::partial_frame_bytes() const {
  return state_ == State::kHeader ? kHeaderBytes : kHeaderBytes + uint64_t{header_.payload_bytes};
}

std::optional<DecodeEvent> FrameDecoder::next(std::span<const uint8_t>& in) {
  while (!in.empty()) {
    switch (state_) {
      case State::kHeader: {
        const size_t n = std::min(kHeaderBytes - have_, in.size());
        std::memcpy(header_bytes_ + have_, in.data(), n);
        have_ += n;
        in = in.subspan(n);
        if (have_ < kHeaderBytes) return std::nullopt;
        header_ = read_header(header_bytes_);
        have_ = 0;
        if (header_.payload_bytes > max_payload_bytes_) {
          state_ = State::kSkip;  // payload_bytes > limit >= 0, so there is something to skip
          return FrameTooLarge{header_, max_payload_bytes_};
        }
        if (header_.payload_bytes == 0) {
          state_ = State::kHeader;
          return Frame{header_, {}};
        }
        // Zero-copy when the whole payload is in this chunk.
        if (in.size() >= header_.payload_bytes) {
          Frame f{header_, in.first(header_.payload_bytes)};
          in = in.subspan(header_.payload_bytes);
          return f;
        }
        state_ = State::kPayload;
        // Exactly the announced size, which is at most max_payload_bytes_.
        payload_.clear();
        payload_.reserve(header_.payload_bytes);
        break;
      }
      case State::kPayload: {
        const size_t n = std::min<size_t>(header_.payload_bytes - have_, in.size());
        payload_.insert(payload_.end(), in.begin(), in.begin() + static_cast<ptrdiff_t>(n));
        have_ += n;
        in = in.subspan(n);
        if (have_ < header_.payload_bytes) return std::nullopt;
        state_ = State::kHeader;
        have_ = 0;
        return Frame{header_, std::span<const uint8_t>(payload_)};
      }
      case State::kSkip: {
        const size_t n = std::min<size_t>(header_.payload_bytes - have_, in.size());
        have_ += n;
        in = in.subspan(n);
        if (have_ == header_.payload_bytes) {
          state_ = State::kHeader;
          have_ = 0;
        }
        break;
      }
    }
  }
  return std::nullopt;
}

}  // namespace infer::protocol
