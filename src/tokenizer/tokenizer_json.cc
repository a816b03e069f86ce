// tokenizer.json -> Pipeline.
#include <algorithm>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace tq::tok {

namespace {

std::vector<AddedToken> ParseAddedTokens(const Json& root, const std::string& where) {
  std::vector<AddedToken> out;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  const std::string w = where + ": added_tokens";
  TQ_CHECK(it->is_array(), w, "must be an array");
  for (const Json& e : *it) {
    AddedToken t;
    t.content = GetString(e, "content", w);
    TQ_CHECK(IsValidUtf8(t.content), w, "token content is not valid UTF-8");
    const int64_t id = GetIntOr(e, "id", -1, w);
    TQ_CHECK(id >= 0 && id <= INT32_MAX, w, "token '{}' has a missing or bad id", t.content);
    t.id = int32_t(id);
    t.special = GetBoolOr(e, "special", false, w);
    t.single_word = GetBoolOr(e, "single_word", false, w);
    t.lstrip = GetBoolOr(e, "lstrip", false, w);
    t.rstrip = GetBoolOr(e, "rstrip", false, w);
    t.normalized = GetBoolOr(e, "normalized", !t.special, w);
    out.push_back(std::move(t));
  }
  return out;
}

template <typename T, typename Make>
std::unique_ptr<T> Optional(const Json& root, const char* key, Make make,
                            const std::string& where) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return nullptr;
  return make(*it, where + ": " + key);
}

}  // namespace

std::unique_ptr<Pipeline> ParseTokenizerJson(const std::string& text, const std::string& where) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    Fail(where, "invalid JSON: {}", e.what());
  }
  TQ_CHECK(root.is_object(), where, "tokenizer.json must hold a JSON object");
  auto p = std::make_unique<Pipeline>();
  p->where = where;
  try {
    auto model_it = root.find("model");
    TQ_CHECK(model_it != root.end() && !model_it->is_null(), where, "missing 'model'");
    p->model = BpeModel::FromJson(*model_it, where);
    p->normalizer = Optional<Normalizer>(root, "normalizer", MakeNormalizer, where);
    p->pre_tokenizer = Optional<PreTokenizer>(root, "pre_tokenizer", MakePreTokenizer, where);
    p->post_processor = Optional<PostProcessor>(root, "post_processor", MakePostProcessor, where);
    p->decoder = Optional<Decoder>(root, "decoder", MakeDecoder, where);

    // An added token whose content the model knows takes the model's id (as `tokenizers`
    // assigns it); otherwise the id the file gives.
    p->added = ParseAddedTokens(root, where);
    p->vocab_size = p->model->max_id() + 1;
    std::vector<AddedToken> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    for (AddedToken& t : p->added) {
      if (auto id = p->model->TokenToId(t.content)) t.id = *id;
      if (p->added_by_content.count(t.content)) continue;  // a duplicate: the first one stays
      p->added_by_content.emplace(t.content, t.id);
      p->added_by_id.emplace(t.id, t.content);
      p->special_ids[t.id] = t.special;
      p->vocab_size = std::max<int64_t>(p->vocab_size, int64_t(t.id) + 1);
      if (t.normalized) {
        std::string pat = t.content;
        if (p->normalizer) p->normalizer->Normalize(pat);
        norm.push_back(t);
        norm_pat.push_back(std::move(pat));
      } else {
        raw.push_back(t);
        raw_pat.push_back(t.content);
      }
    }
    p->raw_matcher = std::make_unique<AddedTokenMatcher>(raw, raw_pat);
    p->norm_matcher = std::make_unique<AddedTokenMatcher>(norm, norm_pat);
  } catch (const Json::exception& e) {
    Fail(where, "malformed tokenizer.json: {}", e.what());
  }
  return p;
}

}  // namespace tq::tok
