// A context-free grammar over bytes, the form constrained decoding runs on. Rules are lists of
// alternatives; an alternative is a sequence of symbols, each a byte set or a reference to a rule.
// Repetition is written as right recursion (R ::= x R | ""), so a matcher never meets left
// recursion. Built with GrammarBuilder (json_schema.h compiles JSON Schema into one).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tq::grammar {

// 256-bit set of bytes.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(uint8_t(b));
  }
  static ByteSet Of(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
};

// One element of the flat program: alternatives are laid out back to back, each ending in kEnd.
struct Element {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  uint32_t rule = 0;  // kRule: the referenced rule
  ByteSet bytes;      // kBytes: the accepted bytes
};

struct Grammar {
  std::vector<Element> elements;
  // rule -> start indices (into `elements`) of its alternatives.
  std::vector<std::vector<uint32_t>> alternatives;
  std::vector<std::string> rule_names;  // for error messages and dumps
  uint32_t root = 0;
  // Special tokens (by their text) the grammar may produce as a whole, e.g. "<tool_call>" or
  // "[TOOL_CALLS]"; all other special tokens are masked out.
  std::vector<std::string> special_tokens;

  // Human-readable EBNF-like dump (tests, debugging).
  std::string ToString() const;
};

// A symbol of an alternative while building.
struct Symbol {
  bool is_rule = false;
  uint32_t rule = 0;
  ByteSet bytes;
  static Symbol Rule(uint32_t r) {
    Symbol s;
    s.is_rule = true;
    s.rule = r;
    return s;
  }
  static Symbol Bytes(ByteSet b) {
    Symbol s;
    s.bytes = b;
    return s;
  }
};
using Sequence = std::vector<Symbol>;

class GrammarBuilder {
 public:
  // A new rule without alternatives yet (add them with AddAlternative).
  uint32_t NewRule(std::string name);
  void AddAlternative(uint32_t rule, Sequence seq);
  // Rule shorthands.
  uint32_t RuleOf(std::string name, std::vector<Sequence> alts);
  // "" | x | x x | ... (unbounded): R ::= x R | "".
  uint32_t Star(std::string name, Sequence x);
  // Between lo and hi copies of x (hi < 0: unbounded); x is one rule reference.
  uint32_t Repeat(std::string name, uint32_t x, int lo, int hi);

  static Sequence Literal(std::string_view text);
  static void Append(Sequence& to, const Sequence& what) {
    to.insert(to.end(), what.begin(), what.end());
  }

  // Checks every rule has an alternative and every reference exists; lays out the program.
  Grammar Build(uint32_t root, std::vector<std::string> special_tokens = {}) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;
};

}  // namespace tq::grammar
