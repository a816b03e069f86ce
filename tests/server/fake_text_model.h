// A byte-level stand-in for a tokenizer + chat template: id = byte + 3; 0 <s>, 1 </s>, 2 <unk>.
#pragma once

#include "server/text_model.h"

namespace tq::server::test {

class FakeTextModel : public TextModel {
 public:
  static constexpr int64_t kVocab = 259;
  int64_t vocab_size() const override { return kVocab; }
  std::vector<int32_t> Encode(const std::string& text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(0);
    for (unsigned char c : text) ids.push_back(int32_t(c) + 3);
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    static const char* special[] = {"<s>", "</s>", "<unk>"};
    std::string s;
    for (int32_t id : ids) {
      if (id < 3) {
        if (!skip_special) s += special[id];
      } else {
        s += char(id - 3);
      }
    }
    return s;
  }
  std::string RenderChat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json&,
                         bool add_gen, const nlohmann::ordered_json&) const override {
    std::string s = "<s>";
    for (const auto& m : messages) {
      if (m["role"] == "fail") throw std::runtime_error("template failed");
      s += m["role"].get<std::string>() + ":" + m["content"].get<std::string>() + "\n";
    }
    if (add_gen) s += "A:";
    return s;
  }
  std::vector<int32_t> EosTokens() const override { return {1}; }
  bool IsSpecialToken(int32_t id) const override { return id < 3; }
  SamplingParams DefaultSampling() const override {
    SamplingParams p;
    p.temperature = 0;  // greedy: the fake engine's output is then exact
    return p;
  }
};

}  // namespace tq::server::test
