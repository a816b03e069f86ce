#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tq::tok {

namespace {

// Per-thread match data and a JIT stack large enough for long runs of one class (\s+ over
// megabytes of blanks would overflow PCRE2's 32 KiB default).
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& MatchState() {
  thread_local ThreadMatchState state;
  return state;
}

// `tokenizers` compiles its regexes with Oniguruma, whose Unicode \s is the White_Space property
// (PCRE2's also takes U+180E), whose \w is Alphabetic+M+Nd+Pc+Join_Control (PCRE2's is L+N+_),
// and whose \h is a hex digit (PCRE2: horizontal space). Rewrites those escapes so PCRE2 agrees.
std::string OnigToPcre(const std::string& re) {
  static const char kWord[] = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";
  std::string out;
  out.reserve(re.size() + 16);
  bool in_class = false;
  size_t class_start = 0;  // index in `re` just after "[" or "[^"
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[++i];
      if (e == 'Q') {  // \Q...\E: literal text, copied as is
        const size_t end = re.find("\\E", i + 1);
        const size_t stop = end == std::string::npos ? re.size() : end + 2;
        out.append(re, i - 1, stop - (i - 1));
        i = stop - 1;
        continue;
      }
      switch (e) {
        case 's':
          out += R"(\p{White_Space})";
          break;
        case 'S':
          out += R"(\P{White_Space})";
          break;
        case 'h':
          out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
          break;
        case 'H':
          out += in_class ? "\\H" : "[^0-9a-fA-F]";
          break;
        case 'w':
          out += in_class ? std::string(kWord) : "[" + std::string(kWord) + "]";
          break;
        case 'W':
          out += in_class ? std::string("\\W") : "[^" + std::string(kWord) + "]";
          break;
        default:
          out.push_back('\\');
          out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < re.size() && re[i + 1] == '^') out.push_back(re[++i]);
      class_start = i + 1;
      continue;
    }
    if (in_class && c == '[' && i + 1 < re.size() && re[i + 1] == ':') {  // [:alpha:]
      const size_t end = re.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(re, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string where;
};

Regex::Regex(const std::string& pattern, const std::string& where) : impl_(new Impl) {
  impl_->where = where;
  int err = 0;
  PCRE2_SIZE err_off = 0;
  const std::string pcre = OnigToPcre(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre.data()), pcre.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    Fail(where, "bad regex /{}/ at offset {}: {}", pattern, err_off,
         reinterpret_cast<const char*>(msg));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

bool Regex::Find(std::string_view text, size_t start, size_t* begin, size_t* end) const {
  ThreadMatchState& st = MatchState();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = impl_->jit
                     ? pcre2_jit_match(impl_->code, subject, text.size(), start, 0, st.data, st.ctx)
                     : pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                   st.data, st.ctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    Fail(impl_->where, "regex match failed: {}", reinterpret_cast<const char*>(msg));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  *begin = ov[0];
  *end = ov[1];
  return true;
}

void Regex::FindAll(std::string_view text, std::vector<Match>& out) const {
  size_t pos = 0;
  size_t last_end = SIZE_MAX;
  while (pos <= text.size()) {
    size_t b, e;
    if (!Find(text, pos, &b, &e)) break;
    if (b == e && b == last_end) {
      // Empty match glued to the previous one: retry one character later.
      if (b >= text.size()) break;
      pos = b + Utf8Len(uint8_t(text[b]));
      continue;
    }
    out.push_back({b, e, true});
    last_end = e;
    pos = e > b ? e : (e < text.size() ? e + Utf8Len(uint8_t(text[e])) : text.size() + 1);
  }
}

std::string RegexEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      c == '_' || uint8_t(c) >= 0x80;
    if (!word) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Pattern Pattern::Literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::FromRegex(const std::string& re, const std::string& where) {
  Pattern p;
  p.regex_ = std::make_shared<const Regex>(re, where);
  return p;
}

void Pattern::FindMatches(std::string_view text, std::vector<Match>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  if (regex_) {
    regex_->FindAll(text, out);
  } else if (!literal_.empty()) {
    for (size_t p = text.find(literal_); p != std::string_view::npos;
         p = text.find(literal_, p + literal_.size())) {
      out.push_back({p, p + literal_.size(), true});
    }
  }
  // Fill the gaps between matches with non-matches, in place from the back.
  const size_t n = out.size();
  size_t gaps = 0, prev = 0;
  for (size_t i = 0; i < n; ++i) {
    if (out[i].begin != prev) ++gaps;
    prev = out[i].end;
  }
  const bool tail = prev != text.size();
  out.resize(n + gaps + (tail ? 1 : 0));
  size_t w = out.size();
  if (tail) out[--w] = {prev, text.size(), false};
  for (size_t i = n; i-- > 0;) {
    const Match m = out[i];
    out[--w] = m;
    const size_t start = i > 0 ? out[i - 1].end : 0;
    if (m.begin != start) out[--w] = {start, m.begin, false};
  }
}

void ReplaceAll(const Pattern& pattern, const std::string& content, std::string& s) {
  thread_local std::vector<Match> matches;
  pattern.FindMatches(s, matches);
  bool any = false;
  for (const Match& m : matches) any |= m.is_match;
  if (!any) return;
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  for (const Match& m : matches) {
    if (m.is_match) {
      out.append(content);
    } else {
      out.append(s, m.begin, m.end - m.begin);
    }
  }
  s.swap(out);
}

Pattern MakePattern(const Json& j, const std::string& where) {
  TQ_CHECK(j.is_object(), where, "field 'pattern' must be an object");
  if (j.contains("String")) return Pattern::Literal(GetString(j, "String", where));
  if (j.contains("Regex")) return Pattern::FromRegex(GetString(j, "Regex", where), where);
  Fail(where, "field 'pattern' must hold 'String' or 'Regex'");
}

}  // namespace tq::tok
