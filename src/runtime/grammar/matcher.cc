#include "runtime/grammar/matcher.h"

#include <algorithm>

namespace tq::grammar {
namespace {

// Expands `stack` until its top is a byte set (or it is empty), appending results to `out`.
// `depth` bounds the expansions of one call chain (rules that recurse without consuming).
void Expand(const Grammar& g, Stack& stack, std::vector<Stack>& out, int depth) {
  if (depth > int(kMaxStackDepth) || stack.size() > kMaxStackDepth || out.size() > kMaxStacks) {
    return;
  }
  while (!stack.empty()) {
    const Element& e = g.elements[stack.back()];
    if (e.kind == Element::kBytes) break;
    if (e.kind == Element::kEnd) {
      stack.pop_back();  // the alternative is done; the parent already points past its ref
      continue;
    }
    // A rule reference: the parent continues after it; each alternative starts on top.
    ++stack.back();
    const auto& alts = g.alternatives[e.rule];
    for (size_t a = 0; a < alts.size(); ++a) {
      Stack branch = stack;
      branch.push_back(alts[a]);
      Expand(g, branch, out, depth + 1);
    }
    return;
  }
  out.push_back(std::move(stack));
}

}  // namespace

GrammarState GrammarState::Start(const Grammar& g) {
  GrammarState s;
  for (uint32_t a : g.alternatives[g.root]) {
    Stack st{a};
    Expand(g, st, s.stacks_, 0);
  }
  s.Finish();
  return s;
}

bool GrammarState::complete() const {
  for (const Stack& s : stacks_)
    if (s.empty()) return true;
  return false;
}

bool GrammarState::can_continue() const {
  for (const Stack& s : stacks_)
    if (!s.empty()) return true;
  return false;
}

GrammarState GrammarState::Advance(const Grammar& g, uint8_t byte) const {
  GrammarState next;
  for (const Stack& s : stacks_) {
    if (s.empty() || !g.elements[s.back()].bytes.Has(byte)) continue;
    Stack moved = s;
    ++moved.back();
    Expand(g, moved, next.stacks_, 0);
  }
  next.Finish();
  return next;
}

GrammarState GrammarState::Advance(const Grammar& g, std::string_view bytes) const {
  GrammarState s = *this;
  for (unsigned char c : bytes) {
    s = s.Advance(g, c);
    if (s.dead()) break;
  }
  return s;
}

ByteSet GrammarState::NextBytes(const Grammar& g) const {
  ByteSet u;
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const ByteSet& b = g.elements[s.back()].bytes;
    for (int i = 0; i < 4; ++i) u.bits[size_t(i)] |= b.bits[size_t(i)];
  }
  return u;
}

void GrammarState::Finish() {
  if (stacks_.size() > 1) {
    std::sort(stacks_.begin(), stacks_.end());
    stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
  }
  if (stacks_.size() > kMaxStacks) stacks_.resize(kMaxStacks);
}

}  // namespace tq::grammar
