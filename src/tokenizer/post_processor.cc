#include "tokenizer/post_processor.h"

namespace tq::tok {

namespace {

// Ids before and after the sequence.
class WrapProcessor final : public PostProcessor {
 public:
  WrapProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void Process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class IdentityProcessor final : public PostProcessor {
 public:
  void Process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void Process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, ...] with
// "special_tokens": {"<s>": {"ids": [1], ...}}.
std::unique_ptr<PostProcessor> MakeTemplate(const Json& j, const std::string& w) {
  const Json& single = GetArray(j, "single", w);
  const Json* specials = j.contains("special_tokens") ? &j["special_tokens"] : nullptr;
  TQ_CHECK(!specials || specials->is_object(), w, "field 'special_tokens' must be an object");
  std::vector<int32_t> before, after;
  bool seen_a = false;
  for (const Json& piece : single) {
    TQ_CHECK(piece.is_object() && piece.size() == 1, w,
             "template piece must be {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}");
    if (piece.contains("Sequence")) {
      const std::string id = GetString(piece["Sequence"], "id", w);
      TQ_CHECK(id == "A", w, "the single template may only hold sequence A, not '{}'", id);
      TQ_CHECK(!seen_a, w, "the single template holds sequence A twice");
      seen_a = true;
      continue;
    }
    TQ_CHECK(piece.contains("SpecialToken"), w, "unknown template piece {}", piece.dump());
    const std::string name = GetString(piece["SpecialToken"], "id", w);
    TQ_CHECK(specials && specials->contains(name), w, "missing SpecialToken '{}' in special_tokens",
             name);
    for (const Json& id : GetArray((*specials)[name], "ids", w)) {
      TQ_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX,
               w, "special token '{}' has a bad id", name);
      (seen_a ? after : before).push_back(int32_t(id.get<int64_t>()));
    }
  }
  return std::make_unique<WrapProcessor>(std::move(before), std::move(after));
}

// "cls": ["<s>", 0] style pair -> its id.
int32_t PairId(const Json& j, const char* key, const std::string& w) {
  const Json& v = Field(j, key, w);
  TQ_CHECK(v.is_array() && v.size() == 2 && v[1].is_number_integer() && v[1].get<int64_t>() >= 0 &&
               v[1].get<int64_t>() <= INT32_MAX,
           w, "field '{}' must be [token, id]", key);
  return int32_t(v[1].get<int64_t>());
}

}  // namespace

std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j, const std::string& where) {
  NestingGuard guard(where);
  const std::string type = TypeOf(j, where);
  const std::string w = where + ": post_processor " + type;
  if (type == "TemplateProcessing") return MakeTemplate(j, w);
  if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    return std::make_unique<WrapProcessor>(std::vector<int32_t>{PairId(j, "cls", w)},
                                           std::vector<int32_t>{PairId(j, "sep", w)});
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const Json& e : GetArray(j, "processors", w)) parts.push_back(MakePostProcessor(e, where));
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  Fail(where, "unsupported post_processor type '{}'", type);
}

}  // namespace tq::tok
