// The parts of a loaded tokenizer.json (internal to tokenizer/; the public face is Tokenizer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace tq::tok {

struct Pipeline {
  std::string where;
  std::vector<AddedToken> added;        // as listed, ids resolved
  StringMap<int32_t> added_by_content;  // content -> id
  std::unordered_map<int32_t, std::string> added_by_id;
  std::unordered_map<int32_t, bool> special_ids;    // id -> special
  std::unique_ptr<AddedTokenMatcher> raw_matcher;   // normalized=false tokens
  std::unique_ptr<AddedTokenMatcher> norm_matcher;  // normalized=true tokens (normalized form)
  std::unique_ptr<Normalizer> normalizer;           // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;      // may be null
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // may be null
  int64_t vocab_size = 0;
};

// Parses tokenizer.json text; errors name `where`.
std::unique_ptr<Pipeline> ParseTokenizerJson(const std::string& text, const std::string& where);

}  // namespace tq::tok
