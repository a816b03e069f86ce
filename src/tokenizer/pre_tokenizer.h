// Pre-tokenizers (tokenizer.json "pre_tokenizer"): split a normalized piece into the words the
// BPE model encodes one by one, possibly rewriting them (ByteLevel, Metaspace).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace tq::tok {

struct Piece {
  std::string text;
  // The piece begins at offset 0 of the original input (Metaspace's prepend_scheme "first").
  bool at_start = false;
};

// How a split treats the delimiters it finds (`tokenizers`' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Turns matches/gaps into the kept [begin, end) ranges.
void ApplyBehavior(const std::vector<Match>& matches, SplitBehavior behavior,
                   std::vector<Match>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped.
  virtual void PreTokenize(std::vector<Piece>& pieces) const = 0;
};

// Types: Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, CharDelimiterSplit, Digits,
// Punctuation, BertPreTokenizer, Sequence. Others -> tq::Error.
std::unique_ptr<PreTokenizer> MakePreTokenizer(const Json& j, const std::string& where);

}  // namespace tq::tok
