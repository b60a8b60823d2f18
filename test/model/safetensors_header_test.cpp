// parse_safetensors_header against corrupt input: every check it makes, each with its error code
// and the numbers in its message; and the same checks reached through TensorStore on real files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace infer {
namespace {

// 8-byte little-endian length (`len`, default the header's size), header, then `data_bytes` zeros.
std::vector<uint8_t> file_bytes(const std::string& header, size_t data_bytes, uint64_t len = ~0ull) {
  const uint64_t n = len == ~0ull ? header.size() : len;
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

Result<SafetensorsHeader> parse(const std::vector<uint8_t>& f) {
  return parse_safetensors_header(f, f.size(), "m.safetensors");
}

void expect_rejects(const std::string& header, size_t data_bytes, ErrorCode code, const std::string& needle) {
  auto r = parse(file_bytes(header, data_bytes));
  ASSERT_FALSE(r.ok()) << header;
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("m.safetensors: ", 0), 0u) << r.error().message;
}

TEST(SafetensorsHeader, ParsesAValidHeader) {
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                             R"("a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
                             R"("s":{"dtype":"F16","shape":[],"data_offsets":[12,14]}}  )";
  auto r = parse(file_bytes(header, 14));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->data_start, 8u + header.size());
  EXPECT_EQ(r->tensors[0].name, "a");
  EXPECT_EQ(r->tensors[0].dtype, DType::kBF16);
  EXPECT_EQ(r->tensors[1].end, 12u);
  EXPECT_EQ(r->tensors[2].numel(), 1);
}

TEST(SafetensorsHeader, RejectsAFileShorterThanEightBytes) {
  const std::vector<uint8_t> f = {1, 0, 0};
  auto r = parse(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("file has 3 bytes"), std::string::npos) << r.error().message;
}

TEST(SafetensorsHeader, RejectsAHeaderLongerThanTheFile) {
  auto r = parse(file_bytes("{}", 0, 3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("header length 3 runs past the end of the 10-byte file"),
            std::string::npos)
      << r.error().message;
}

TEST(SafetensorsHeader, RejectsAnAbsurdHeaderLength) {
  auto f = file_bytes("{}", 0, 200ull << 20);
  auto r = parse_safetensors_header(f, 1ull << 40, "m.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("header length 209715200 is absurd"), std::string::npos)
      << r.error().message;
}

TEST(SafetensorsHeader, RejectsNonJsonAndNonObjectHeaders) {
  expect_rejects("{\"a\": ", 0, ErrorCode::kParse, "not valid JSON");
  expect_rejects("[1, 2]", 0, ErrorCode::kParse, "header is a JSON array");
  expect_rejects(R"({"a": 5})", 0, ErrorCode::kParse, "tensor \"a\" is not an object");
}

TEST(SafetensorsHeader, RejectsEntriesMissingFields) {
  expect_rejects(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, ErrorCode::kParse,
                 "tensor \"a\" needs dtype, shape and data_offsets");
  expect_rejects(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, ErrorCode::kParse, "needs dtype");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[1]}})", 4, ErrorCode::kParse, "needs dtype");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, ErrorCode::kParse,
                 "data_offsets is not [begin, end]");
  expect_rejects(R"({"a":{"dtype":"F32","shape":7,"data_offsets":[0,4]}})", 4, ErrorCode::kParse,
                 "shape is not a list");
  expect_rejects(R"({"a":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", 4, ErrorCode::kParse,
                 "dtype is not a string");
}

TEST(SafetensorsHeader, RejectsUnsupportedDtypesByName) {
  expect_rejects(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, ErrorCode::kUnsupported,
                 "tensor \"a\" has dtype F64; only BF16, F16 and F32 are supported");
  expect_rejects(R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1, ErrorCode::kUnsupported,
                 "dtype I8");
}

TEST(SafetensorsHeader, RejectsNegativeOrOverflowingShapes) {
  expect_rejects(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, ErrorCode::kParse,
                 "shape dimension is -1");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, ErrorCode::kParse,
                 "shape dimension is 1.5");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
                 ErrorCode::kParse, "too many elements");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", 4,
                 ErrorCode::kParse, "too many elements");
}

TEST(SafetensorsHeader, RejectsBadOffsets) {
  expect_rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, ErrorCode::kParse,
                 "tensor \"a\" ends at byte 4 before it begins at 8");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 8, ErrorCode::kParse,
                 "tensor \"a\" ends at byte 12 of the data section, which has 8");
  expect_rejects(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8, ErrorCode::kParse,
                 "data_offsets begin is -4");
}

TEST(SafetensorsHeader, RejectsASizeThatIsNotNumelTimesDtypeSize) {
  expect_rejects(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", 8, ErrorCode::kShape,
                 "tensor \"a\" BF16 [2,3] needs 12 bytes, data_offsets give 8");
}

TEST(SafetensorsHeader, RejectsOverlappingTensors) {
  expect_rejects(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 12, ErrorCode::kParse, "tensor \"b\" [4, 12) overlaps tensor \"a\" [0, 8)");
}

TEST(SafetensorsHeader, CorruptFilesFailToOpenWithTheirPath) {
  const auto dir = std::filesystem::temp_directory_path() / ("infer_sth_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto f = file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 8);
  std::ofstream(dir / "model.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
  auto r = TensorStore::open(dir);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find((dir / "model.safetensors").string() + ": tensor \"a\" ends at byte 12"),
            std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace infer
