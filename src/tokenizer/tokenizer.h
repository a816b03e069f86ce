// A Hugging Face `tokenizers` tokenizer.json, for BPE models, run as the file declares it:
// added tokens -> normalizer -> pre-tokenizer -> BPE model -> post-processor, and the decoder.
//
// The pipeline follows the `tokenizers` library exactly (the reference.json cases of both shared
// models are a test). Things it does not model: truncation and padding (ignored; Encode handles
// one sequence), BPE dropout (ignored: encoding is deterministic), token offsets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tq {

namespace tok {
struct Pipeline;
}  // namespace tok

class Tokenizer {
 public:
  // Parses a tokenizer.json text; `where` names it in errors (usually the file path). Throws
  // tq::Error for invalid JSON, a missing/unsupported component type, or inconsistent data.
  static std::unique_ptr<Tokenizer> FromJson(const std::string& json_text,
                                             const std::string& where);
  // Loads <model_dir>/tokenizer.json.
  static std::unique_ptr<Tokenizer> Load(const std::string& model_dir);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text -> ids. Invalid UTF-8 bytes in `text` are replaced by U+FFFD first (as Python's
  // errors="replace" would), so any byte string encodes. Thread-safe.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids -> text through the decoder. Unknown ids are skipped, as `tokenizers` does.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // max id + 1 over the model vocab and the added tokens
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token string Decode works from ("" if unknown): the vocab entry, or an added token's
  // content (its normalized form for a normalized=true added token, as `tokenizers` does).
  std::string IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;  // an added token with special=true

 private:
  explicit Tokenizer(std::unique_ptr<tok::Pipeline> p);
  std::unique_ptr<tok::Pipeline> p_;
};

}  // namespace tq
