// Loading the shared tokenizer fixtures once (see tokenizer_fixtures.h).
#include "test/model/tokenizer/tokenizer_fixtures.h"

#include <gtest/gtest.h>

#include <memory>

#include "test/test_paths.h"

namespace infer::test {
namespace {

const Tokenizer* load_once(std::unique_ptr<Tokenizer>& slot, const std::filesystem::path& p) {
  if (!slot) {
    Result<Tokenizer> r = Tokenizer::load(p);
    if (!r.ok()) {
      ADD_FAILURE() << "cannot load " << p << ": " << r.error().message;
      return nullptr;
    }
    slot = std::make_unique<Tokenizer>(std::move(r).value());
  }
  return slot.get();
}

}  // namespace

const Tokenizer* gemma3_tokenizer() {
  static std::unique_ptr<Tokenizer> tok;
  return load_once(tok, shared_fixtures() / "tokenizer" / "gemma3" / "tokenizer.json");
}

const Tokenizer* gemma4_tokenizer() {
  static std::unique_ptr<Tokenizer> tok;
  return load_once(tok, shared_fixtures() / "gemma4-text" / "e2b-vocab" / "tokenizer.json");
}

nlohmann::json read_json(const std::filesystem::path& p) {
  const std::string text = read_file(p);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    ADD_FAILURE() << p << " is not valid JSON";
    return nullptr;
  }
  return j;
}

}  // namespace infer::test
