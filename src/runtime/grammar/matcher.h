// Where a partial output stands in a Grammar: the set of pushdown stacks still alive after the
// bytes seen so far (several when the grammar is ambiguous there, e.g. anyOf branches that start
// alike). A stack holds element indices, its back being the next byte set to match; an empty
// stack means the whole grammar matched. States are values: Advance returns a new one, so a
// token-mask search can branch from any state.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace tq::grammar {

using Stack = std::vector<uint32_t>;

class GrammarState {
 public:
  GrammarState() = default;
  // The state before any byte: the root rule expanded.
  static GrammarState Start(const Grammar& g);

  bool dead() const { return stacks_.empty(); }
  // The output so far is a whole sentence of the grammar.
  bool complete() const;
  // Something more may follow (some stack is not empty).
  bool can_continue() const;

  // After one more byte / several bytes (dead() when the grammar does not allow them).
  GrammarState Advance(const Grammar& g, uint8_t byte) const;
  GrammarState Advance(const Grammar& g, std::string_view bytes) const;
  // The union of the byte sets the next byte may come from.
  ByteSet NextBytes(const Grammar& g) const;

  const std::vector<Stack>& stacks() const { return stacks_; }
  bool operator==(const GrammarState& o) const { return stacks_ == o.stacks_; }

 private:
  void Finish();  // sorts and deduplicates
  std::vector<Stack> stacks_;
};

// Limits that keep a hostile grammar (a schema whose $ref recursion never consumes a byte, or an
// anyOf explosion) from running away: a stack deeper than this is dropped, a state with more
// stacks than this is cut to the first ones.
constexpr size_t kMaxStackDepth = 1024;
constexpr size_t kMaxStacks = 2048;

}  // namespace tq::grammar
