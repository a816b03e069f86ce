// A compiled Jinja2 template: parse once, render many times with different variables.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/lexer.h"

namespace tq::jinja {

struct TemplateOptions {
  bool trim_blocks = false;  // Jinja's defaults; Hugging Face turns both on
  bool lstrip_blocks = false;
  RenderLimits limits;
};

class Template {
 public:
  // Throws tq::Error("[template] <name>:<line>:<col>: <message>") on syntax errors.
  static Template Parse(const std::string& source, const std::string& name,
                        const TemplateOptions& options = {});

  // `vars` are the render-time variables (they shadow the globals: range, namespace, ...).
  // Errors, including raise_exception(), throw tq::Error with the position.
  std::string Render(const Dict& vars) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  TemplateOptions options_;
  std::shared_ptr<const Body> body_;
};

}  // namespace tq::jinja
