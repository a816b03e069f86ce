#include "tokenizer/jinja/template.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace tq::jinja {
namespace {

[[noreturn]] void Rethrow(const std::string& name, const RenderError& e) {
  if (e.line > 0)
    throw tq::Error("template", fmt::format("{}:{}:{}: {}", name, e.line, e.col, e.message));
  throw tq::Error("template", fmt::format("{}: {}", name, e.message));
}

}  // namespace

Template Template::Parse(const std::string& source, const std::string& name,
                         const TemplateOptions& options) {
  Template t;
  t.name_ = name;
  t.options_ = options;
  try {
    LexOptions lex;
    lex.trim_blocks = options.trim_blocks;
    lex.lstrip_blocks = options.lstrip_blocks;
    t.body_ = std::make_shared<const Body>(jinja::Parse(Lex(NormalizeNewlines(source), lex)));
  } catch (const RenderError& e) {
    Rethrow(name, e);
  }
  return t;
}

std::string Template::Render(const Dict& vars) const {
  auto globals = std::make_shared<Dict>();
  AddGlobals(*globals);
  for (const auto& [k, v] : vars.items) globals->Set(k, v);
  try {
    Evaluator ev(globals, options_.limits);
    return ev.Render(*body_);
  } catch (const RenderError& e) {
    Rethrow(name_, e);
  }
}

}  // namespace tq::jinja
