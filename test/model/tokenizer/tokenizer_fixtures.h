// The real tokenizers the tests share, each loaded once per test binary (a load takes a good
// fraction of a second), and the HF-generated cases beside them.
#pragma once

#include <nlohmann/json.hpp>

#include "model/tokenizer/tokenizer.h"

namespace infer::test {

// gemma3/tokenizer.json (shared fixtures); null, after failing the calling test, when it cannot
// be loaded (callers ASSERT_NE it).
const Tokenizer* gemma3_tokenizer();
// gemma4-text/e2b-vocab/tokenizer.json: the Gemma 4 variant (<|turn>, <turn|>).
const Tokenizer* gemma4_tokenizer();
// A JSON fixture file parsed; null (after a test failure) when missing or malformed.
nlohmann::json read_json(const std::filesystem::path& p);

}  // namespace infer::test
