#include "runtime/grammar/grammar.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tq::grammar {
namespace {

std::string ByteSetString(const ByteSet& s) {
  int count = 0;
  for (int b = 0; b < 256; ++b) count += s.Has(uint8_t(b));
  auto show = [](int b) {
    if (b >= 0x21 && b < 0x7f && b != '\'' && b != '\\') return std::string(1, char(b));
    return fmt::format("\\x{:02x}", b);
  };
  if (count == 1) {
    for (int b = 0; b < 256; ++b)
      if (s.Has(uint8_t(b))) return "'" + show(b) + "'";
  }
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.Has(uint8_t(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.Has(uint8_t(e + 1))) ++e;
    out += e == b ? show(b) : show(b) + "-" + show(e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (size_t r = 0; r < alternatives.size(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < alternatives[r].size(); ++a) {
      if (a) out += " |";
      uint32_t e = alternatives[r][a];
      if (elements[e].kind == Element::kEnd) out += " \"\"";
      for (; elements[e].kind != Element::kEnd; ++e) {
        out += " ";
        out += elements[e].kind == Element::kRule ? rule_names[elements[e].rule]
                                                  : ByteSetString(elements[e].bytes);
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t GrammarBuilder::NewRule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return uint32_t(rules_.size() - 1);
}

void GrammarBuilder::AddAlternative(uint32_t rule, Sequence seq) {
  rules_.at(rule).push_back(std::move(seq));
}

uint32_t GrammarBuilder::RuleOf(std::string name, std::vector<Sequence> alts) {
  const uint32_t r = NewRule(std::move(name));
  for (auto& a : alts) AddAlternative(r, std::move(a));
  return r;
}

uint32_t GrammarBuilder::Star(std::string name, Sequence x) {
  const uint32_t r = NewRule(std::move(name));
  x.push_back(Symbol::Rule(r));
  AddAlternative(r, std::move(x));
  AddAlternative(r, {});
  return r;
}

uint32_t GrammarBuilder::Repeat(std::string name, uint32_t x, int lo, int hi) {
  // tail(k): up to k more copies ("" | x tail(k-1)); unbounded: x* .
  uint32_t tail;
  if (hi < 0) {
    tail = Star(name + "_more", {Symbol::Rule(x)});
  } else {
    tail = RuleOf(name + "_more0", {{}});
    for (int k = 1; k <= hi - lo; ++k) {
      tail = RuleOf(fmt::format("{}_more{}", name, k), {{Symbol::Rule(x), Symbol::Rule(tail)}, {}});
    }
  }
  Sequence seq;
  for (int i = 0; i < lo; ++i) seq.push_back(Symbol::Rule(x));
  seq.push_back(Symbol::Rule(tail));
  return RuleOf(std::move(name), {seq});
}

Sequence GrammarBuilder::Literal(std::string_view text) {
  Sequence s;
  for (unsigned char c : text) s.push_back(Symbol::Bytes(ByteSet::Of(c)));
  return s;
}

Grammar GrammarBuilder::Build(uint32_t root, std::vector<std::string> special_tokens) const {
  Grammar g;
  g.root = root;
  g.rule_names = names_;
  g.special_tokens = std::move(special_tokens);
  TQ_CHECK(root < rules_.size(), "grammar", "root rule {} does not exist", root);
  g.alternatives.resize(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    TQ_CHECK(!rules_[r].empty(), "grammar", "rule '{}' has no alternative", names_[r]);
    for (const Sequence& seq : rules_[r]) {
      g.alternatives[r].push_back(uint32_t(g.elements.size()));
      for (const Symbol& s : seq) {
        Element e;
        if (s.is_rule) {
          TQ_CHECK(s.rule < rules_.size(), "grammar",
                   "rule '{}' refers to rule {} that does not exist", names_[r], s.rule);
          e.kind = Element::kRule;
          e.rule = s.rule;
        } else {
          e.kind = Element::kBytes;
          e.bytes = s.bytes;
        }
        g.elements.push_back(e);
      }
      g.elements.push_back(Element{});
    }
  }
  return g;
}

}  // namespace tq::grammar
