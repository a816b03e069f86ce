// Jinja2 lexer: splits a template into data and tag tokens, applying whitespace control
// (`{%-`, `-%}`, `{{-`, `-}}`, `{#- -#}`, `{%+`, `+%}`) and the trim_blocks / lstrip_blocks
// environment options exactly as jinja2.lexer does, including its newline normalisation and
// the removal of one trailing newline (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tq::jinja {

enum class Tok : uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,  // text holds the operator: "+", "//", "==", "(", "|", ...
  kEof,
};

struct Token {
  Tok type;
  std::string text;  // data, name, decoded string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, col = 1;
};

struct LexOptions {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
};

// Throws RenderError (with line/col) on unterminated tags, strings, comments or stray characters.
std::vector<Token> Lex(const std::string& source, const LexOptions& options);

// Jinja's source normalisation: \r\n, \r and the other str.splitlines() breaks -> \n, and one
// trailing newline dropped.
std::string NormalizeNewlines(const std::string& source);

}  // namespace tq::jinja
