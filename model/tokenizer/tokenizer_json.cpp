// Tokenizer::load/parse: tokenizer.json -> tok::TokenizerData. Checks every field it reads, so a
// malformed file gives an Error naming the field, never an exception or a crash.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/tokenizer/json_fields.h"
#include "model/tokenizer/json_reader.h"
#include "model/tokenizer/tokenizer_impl.h"

namespace infer {
namespace {

using nlohmann::json;

Result<void> parse_vocab(const tok::TokenizerJson& tj, const std::string& where,
                         tok::TokenTable& vocab) {
  if (!tj.vocab_captured) return tok::field_error(where, "vocab", "an object {token: id}");
  vocab.reserve(tj.vocab.size());
  for (const tok::RawVocabEntry& e : tj.vocab) {
    const std::string_view token = tj.bytes(e.key_offset, e.key_length);
    // Messages are built only on failure: this loop runs 262,144 times per load.
    const auto what = [&] { return where + ".vocab[\"" + std::string(token) + "\"]"; };
    if (e.id < 0 || e.id > tok::kMaxTokenId) {
      return make_error(ErrorCode::kParse, what() + " is not a token id (0.." +
                                               std::to_string(tok::kMaxTokenId) + ")");
    }
    const auto id = static_cast<int32_t>(e.id);
    if (!vocab.insert(token, id)) {
      return make_error(ErrorCode::kParse, what() + ": id " + std::to_string(id) +
                                               " is already the id of \"" +
                                               std::string(vocab.token(id)) + "\"");
    }
  }
  return Ok{};
}

// Merges come as "a b" (split at the first space) or ["a", "b"]; the rank is the position.
Result<void> parse_merges(const tok::TokenizerJson& tj, const std::string& where,
                          tok::BpeModel& bpe) {
  if (!tj.merges_captured) return tok::field_error(where, "merges", "an array");
  bpe.merges.reserve(tj.merges.size());
  std::string joined;
  for (size_t i = 0; i < tj.merges.size(); ++i) {
    const tok::RawMerge& m = tj.merges[i];
    std::string_view a, b;
    if (m.form == tok::RawMerge::Form::kString) {
      const std::string_view s = tj.bytes(m.a_offset, m.a_length);
      const size_t space = s.find(' ');
      if (space != std::string_view::npos) {
        a = s.substr(0, space);
        b = s.substr(space + 1);
      }
    } else if (m.form == tok::RawMerge::Form::kPair) {
      a = tj.bytes(m.a_offset, m.a_length);
      b = tj.bytes(m.b_offset, m.b_length);
    }
    const auto what = [&] { return where + ".merges[" + std::to_string(i) + "]"; };
    if (a.empty() || b.empty()) {
      return make_error(ErrorCode::kParse, what() + ": expected \"a b\" or [\"a\", \"b\"]");
    }
    const int32_t id_a = bpe.vocab.find(a), id_b = bpe.vocab.find(b);
    joined.assign(a).append(b);
    const int32_t id_ab = bpe.vocab.find(joined);
    const auto missing = id_a < 0 ? a : id_b < 0 ? b : std::string_view(joined);
    if (id_a < 0 || id_b < 0 || id_ab < 0) {
      return make_error(ErrorCode::kParse, what() + ": token \"" + std::string(missing) +
                                               "\" is not in the vocabulary");
    }
    bpe.merges.insert(id_a, id_b, static_cast<uint32_t>(i), id_ab);
  }
  return Ok{};
}

Result<void> parse_model(const tok::TokenizerJson& tj, tok::TokenizerData& impl) {
  const json& root = tj.root;
  const std::string where = "model";
  INFER_TRY(const json* model, tok::json_field(root, "model", "tokenizer.json"));
  if (!model->is_object()) return tok::field_error("tokenizer.json", "model", "an object");
  if (model->contains("type")) {
    INFER_TRY(const std::string type, tok::json_string(*model, "type", where));
    if (type != "BPE") {
      return make_error(ErrorCode::kUnsupported,
                        "model.type \"" + type + "\" is not supported (only BPE)");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model->contains(key) && !model->at(key).is_null() && model->at(key) != "") {
      return make_error(ErrorCode::kUnsupported, where + "." + key + " is not supported");
    }
  }
  if (model->contains("dropout") && !model->at("dropout").is_null() &&
      !(model->at("dropout").is_number() && model->at("dropout").get<double>() == 0.0)) {
    return make_error(ErrorCode::kUnsupported, where + ".dropout is not supported");
  }
  tok::BpeModel& bpe = impl.model;
  INFER_TRY_VOID(parse_vocab(tj, where, bpe.vocab));
  INFER_TRY_VOID(parse_merges(tj, where, bpe));
  INFER_TRY(bpe.fuse_unk, tok::json_bool_or(*model, "fuse_unk", false, where));
  INFER_TRY(bpe.byte_fallback, tok::json_bool_or(*model, "byte_fallback", false, where));
  INFER_TRY(bpe.ignore_merges, tok::json_bool_or(*model, "ignore_merges", false, where));
  if (model->contains("unk_token") && !model->at("unk_token").is_null()) {
    INFER_TRY(const std::string unk, tok::json_string(*model, "unk_token", where));
    bpe.unk_id = bpe.vocab.find(unk);  // HF fails only when it needs an absent unk; we drop
  }
  bpe.index_characters();
  return Ok{};
}

Result<void> parse_added_tokens(const json& root, tok::TokenizerData& impl) {
  if (!root.contains("added_tokens") || root.at("added_tokens").is_null()) return Ok{};
  INFER_TRY(const json* list, tok::json_array(root, "added_tokens", "tokenizer.json"));
  impl.added.reserve(list->size());  // the matchers keep pointers into this vector
  impl.added_vocab.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json& j = (*list)[i];
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    tok::AddedToken t;
    INFER_TRY(const json* id, tok::json_field(j, "id", at));
    INFER_TRY(t.id, tok::json_id(*id, at + ".id"));
    INFER_TRY(t.content, tok::json_string(j, "content", at));
    INFER_TRY(t.special, tok::json_bool_or(j, "special", false, at));
    INFER_TRY(t.single_word, tok::json_bool_or(j, "single_word", false, at));
    INFER_TRY(t.lstrip, tok::json_bool_or(j, "lstrip", false, at));
    INFER_TRY(t.rstrip, tok::json_bool_or(j, "rstrip", false, at));
    INFER_TRY(t.normalized, tok::json_bool_or(j, "normalized", !t.special, at));
    if (!impl.added_vocab.insert(t.content, t.id)) continue;  // HF keeps the first of duplicates
    impl.added.push_back(std::move(t));
  }
  std::string normed;
  for (const tok::AddedToken& t : impl.added) {
    if (t.normalized && !impl.normalizer.is_identity()) {
      impl.normalizer.apply(t.content, normed);
      impl.normed_matcher.add(normed, &t);
      if (!t.special) impl.normed_plain_matcher.add(normed, &t);
    } else if (t.normalized) {
      impl.normed_matcher.add(t.content, &t);
      if (!t.special) impl.normed_plain_matcher.add(t.content, &t);
    } else {
      impl.raw_matcher.add(t.content, &t);
      if (!t.special) impl.raw_plain_matcher.add(t.content, &t);
    }
  }
  return Ok{};
}

// TemplateProcessing's "single" template: special tokens around $A ("Sequence" A).
Result<void> parse_template(const json& pp, const std::string& where, tok::TokenizerData& impl) {
  INFER_TRY(const json* single, tok::json_array(pp, "single", where));
  INFER_TRY(const json* specials, tok::json_field(pp, "special_tokens", where));
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    if (piece.is_object() && piece.contains("Sequence")) {
      seen_a = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken")) {
      return make_error(ErrorCode::kParse, at + ": expected SpecialToken or Sequence");
    }
    INFER_TRY(const std::string name, tok::json_string(piece.at("SpecialToken"), "id", at));
    INFER_TRY(const json* entry, tok::json_field(*specials, name, where + ".special_tokens"));
    INFER_TRY(const json* ids, tok::json_array(*entry, "ids", where + ".special_tokens." + name));
    for (const json& id : *ids) {
      INFER_TRY(const int32_t v, tok::json_id(id, where + ".special_tokens." + name + ".ids"));
      (seen_a ? impl.suffix_ids : impl.prefix_ids).push_back(v);
    }
  }
  return Ok{};
}

Result<void> parse_post_processor(const json& pp, const std::string& where,
                                  tok::TokenizerData& impl) {
  if (pp.is_null()) return Ok{};
  INFER_TRY(const std::string type, tok::json_string(pp, "type", where));
  if (type == "TemplateProcessing") return parse_template(pp, where, impl);
  if (type == "ByteLevel") return Ok{};  // only adjusts offsets, which we do not produce
  if (type == "Sequence") {
    INFER_TRY(const json* list, tok::json_array(pp, "processors", where));
    for (size_t i = 0; i < list->size(); ++i) {
      INFER_TRY_VOID(
          parse_post_processor((*list)[i], where + ".processors[" + std::to_string(i) + "]", impl));
    }
    return Ok{};
  }
  return make_error(ErrorCode::kUnsupported,
                    where + ": post_processor type \"" + type + "\" is not supported");
}

const json& field_or_null(const json& root, const char* key) {
  static const json kNull;
  return root.contains(key) ? root.at(key) : kNull;
}

Result<void> parse_root(const tok::TokenizerJson& tj, tok::TokenizerData& impl) {
  const json& root = tj.root;
  if (!root.is_object()) return make_error(ErrorCode::kParse, "not a JSON object");
  INFER_TRY(impl.normalizer,
            tok::Normalizer::from_json(field_or_null(root, "normalizer"), "normalizer"));
  INFER_TRY(impl.pre_tokenizer,
            tok::PreTokenizer::from_json(field_or_null(root, "pre_tokenizer"), "pre_tokenizer"));
  INFER_TRY(impl.decoder, tok::Decoder::from_json(field_or_null(root, "decoder"), "decoder"));
  INFER_TRY_VOID(parse_model(tj, impl));
  INFER_TRY_VOID(parse_added_tokens(root, impl));
  INFER_TRY_VOID(
      parse_post_processor(field_or_null(root, "post_processor"), "post_processor", impl));
  impl.vocab_size = std::max(impl.model.vocab.id_limit(), impl.added_vocab.id_limit());
  for (int32_t id : impl.prefix_ids) {
    if (id >= impl.vocab_size) {
      return make_error(ErrorCode::kParse, "post_processor: token id " + std::to_string(id) +
                                               " is outside the vocabulary");
    }
  }
  for (int32_t id : impl.suffix_ids) {
    if (id >= impl.vocab_size) {
      return make_error(ErrorCode::kParse, "post_processor: token id " + std::to_string(id) +
                                               " is outside the vocabulary");
    }
  }
  impl.special.assign(static_cast<size_t>(impl.vocab_size), false);
  for (const tok::AddedToken& t : impl.added) impl.special[t.id] = t.special;
  return Ok{};
}

}  // namespace

Result<Tokenizer> Tokenizer::parse(std::string_view json_text, std::string_view where) {
  auto impl = std::make_unique<tok::TokenizerData>();
  try {
    Result<tok::TokenizerJson> tj = tok::read_tokenizer_json(json_text);
    if (!tj.ok())
      return make_error(tj.error().code, std::string(where) + ": " + tj.error().message);
    Result<void> r = parse_root(*tj, *impl);
    if (!r.ok()) return make_error(r.error().code, std::string(where) + ": " + r.error().message);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::kParse, std::string(where) + ": " + e.what());
  }
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  std::ifstream f(tokenizer_json, std::ios::binary);
  if (!f) return make_error(ErrorCode::kNotFound, tokenizer_json.string() + ": cannot open");
  std::string text;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0) return make_error(ErrorCode::kIo, tokenizer_json.string() + ": cannot read");
  text.resize(static_cast<size_t>(size));
  f.seekg(0, std::ios::beg);
  if (!f.read(text.data(), size)) {
    return make_error(ErrorCode::kIo, tokenizer_json.string() + ": read failed");
  }
  return parse(text, tokenizer_json.string());
}

}  // namespace infer
