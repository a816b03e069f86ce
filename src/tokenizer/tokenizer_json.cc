// tokenizer.json -> Pipeline.
#include <algorithm>
#include <unordered_set>

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
    t.special = GetBoolOr(e, "special", false, w);
    t.single_word = GetBoolOr(e, "single_word", false, w);
    t.lstrip = GetBoolOr(e, "lstrip", false, w);
    t.rstrip = GetBoolOr(e, "rstrip", false, w);
    t.normalized = GetBoolOr(e, "normalized", !t.special, w);
    out.push_back(std::move(t));
  }
  return out;
}

// The token with its flags, as one string (to find exact re-registrations).
std::string TokenKey(const AddedToken& t) {
  std::string k = t.content;
  k.push_back(char('0' + t.single_word + 2 * t.lstrip + 4 * t.rstrip));
  k.push_back(char('0' + t.normalized + 2 * t.special));
  return k;
}

// `tokenizers`' AddedVocabulary::add_tokens, one token at a time, then its matcher refresh.
void RegisterAddedTokens(const std::vector<AddedToken>& tokens, Pipeline& p) {
  const int64_t model_count = p.model->vocab_count();
  std::vector<AddedToken> specials, plain;  // match order: special tokens first
  int64_t max_added = -1;
  std::unordered_set<std::string> registered;  // TokenKey of every token in added_by_id
  for (AddedToken t : tokens) {
    if (t.content.empty()) continue;
    if (t.special && !p.special_contents.count(t.content)) {
      p.special_contents.emplace(t.content, true);
      specials.push_back(t);
    }
    // A token equal in every field to a registered one is ignored.
    if (registered.count(TokenKey(t))) continue;
    int64_t id;
    if (auto it = p.added_by_content.find(t.content); it != p.added_by_content.end()) {
      id = it->second;
    } else if (auto mid = p.model->TokenToId(t.content)) {
      id = *mid;
    } else if (max_added < 0) {
      id = model_count;
    } else {
      id = max_added >= model_count || model_count == 0 ? max_added + 1 : model_count;
    }
    TQ_CHECK(id <= INT32_MAX, p.where, "added token '{}' gets an id out of range", t.content);
    t.id = int32_t(id);
    max_added = std::max(max_added, id);
    p.added_by_content[t.content] = t.id;
    if (auto old = p.added_by_id.find(t.id); old != p.added_by_id.end()) {
      registered.erase(TokenKey(old->second));
    }
    p.added_by_id[t.id] = t;
    registered.insert(TokenKey(t));
    if (!p.special_contents.count(t.content)) plain.push_back(t);
  }
  for (const auto& [id, t] : p.added_by_id) {
    p.vocab_size = std::max<int64_t>(p.vocab_size, int64_t(id) + 1);
    std::string text = t.content;
    if (t.normalized && p.normalizer) p.normalizer->Normalize(text);
    p.added_text[id] = std::move(text);
  }
  // The matchers: each listed token by its content's id, with the flags of that id's token.
  std::vector<AddedToken> raw, norm;
  std::vector<std::string> raw_pat, norm_pat;
  for (const std::vector<AddedToken>* list : {&specials, &plain}) {
    for (const AddedToken& listed : *list) {
      const AddedToken& t = p.added_by_id.at(p.added_by_content.at(listed.content));
      if (listed.normalized) {
        std::string pat = listed.content;
        if (p.normalizer) p.normalizer->Normalize(pat);
        norm.push_back(t);
        norm_pat.push_back(std::move(pat));
      } else {
        raw.push_back(t);
        raw_pat.push_back(listed.content);
      }
    }
  }
  p.raw_matcher = std::make_unique<AddedTokenMatcher>(raw, raw_pat);
  p.norm_matcher = std::make_unique<AddedTokenMatcher>(norm, norm_pat);
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
  if (auto v = root.find("version"); v != root.end()) {
    TQ_CHECK(v->is_string() && *v == "1.0", where, "unknown tokenizer.json version {}", v->dump());
  }
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
    p->vocab_size = p->model->max_id() + 1;

    RegisterAddedTokens(ParseAddedTokens(root, where), *p);
  } catch (const Json::exception& e) {
    Fail(where, "malformed tokenizer.json: {}", e.what());
  }
  return p;
}

}  // namespace tq::tok
