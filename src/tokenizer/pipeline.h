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
  // Added tokens as `tokenizers` registers them: one by one, each taking the id of its content if
  // known (added before, or in the model vocab), else the next free id past the model vocab. The
  // ids written in the file are not used (the library only warns when they differ).
  StringMap<int32_t> added_by_content;                  // content -> id
  std::unordered_map<int32_t, AddedToken> added_by_id;  // id -> the token (last registration)
  StringMap<bool> special_contents;                     // contents of special added tokens
  // What Decode/IdToToken show for an added token: its content, or for a normalized=true token
  // the normalizer's output when that differs (`tokenizers` >= 0.23 decodes those this way).
  std::unordered_map<int32_t, std::string> added_text;
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
