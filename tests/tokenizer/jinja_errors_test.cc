// Broken and hostile templates: every failure is a tq::Error naming the template, line and
// column; nothing crashes or runs away.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/template.h"

namespace tq::jinja {
namespace {

// The message of the tq::Error that parsing (and then rendering) `src` throws, or "" if none.
std::string ErrorOf(const std::string& src, const TemplateOptions& o = {}) {
  try {
    Template::Parse(src, "t.jinja", o).Render(Dict());
  } catch (const tq::Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("line one\n{{ x|nosuchfilter }}"),
            "[template] t.jinja:2:6: No filter named 'nosuchfilter'.");
  EXPECT_EQ(ErrorOf("a\nb\n   {{ x is nosuchtest }}"),
            "[template] t.jinja:3:9: No test named 'nosuchtest'.");
  EXPECT_EQ(ErrorOf("{% frob %}"), "[template] t.jinja:1:4: Encountered unknown tag 'frob'");
  EXPECT_EQ(ErrorOf("{{ 1 + }}"), "[template] t.jinja:1:8: unexpected 'end of print statement'");
  EXPECT_EQ(ErrorOf("x\n  {{ 'abc }}"), "[template] t.jinja:2:6: unterminated string literal");
  EXPECT_EQ(ErrorOf("{{ [1, 2) }}"), "[template] t.jinja:1:9: unexpected ')', expected ']'");
  EXPECT_EQ(ErrorOf("ok\n{# never closed"), "[template] t.jinja:2:1: missing end of comment tag");
  EXPECT_EQ(ErrorOf("{{ x ! y }}"), "[template] t.jinja:1:6: unexpected char '!' at 5");
  EXPECT_EQ(ErrorOf("{% break %}"), "[template] t.jinja:1:4: 'break' outside of a loop");
  EXPECT_EQ(ErrorOf("{% set true = 1 %}"), "[template] t.jinja:1:8: can't assign to 'const'");
}

TEST(JinjaErrors, UnclosedBlocksNameTheBlock) {
  const std::string e = ErrorOf("{% for m in messages %}\n  {% if m %}x{% endfor %}");
  EXPECT_NE(e.find("t.jinja:2:"), std::string::npos) << e;
  const std::string f = ErrorOf("{% for x in y %}\nabc");
  EXPECT_NE(f.find("t.jinja:2:4: unexpected end of template"), std::string::npos) << f;
  EXPECT_NE(f.find("'endfor' or 'else'"), std::string::npos) << f;
  EXPECT_NE(f.find("innermost block that needs to be closed is 'for'"), std::string::npos) << f;
  EXPECT_NE(ErrorOf("{% if a %}{% else %}{% elif b %}{% endif %}").find("unknown tag 'elif'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ x ").find("unexpected end of template"), std::string::npos);
  EXPECT_NE(ErrorOf("{% macro m() %}").find("'endmacro'"), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsNamePosition) {
  EXPECT_EQ(ErrorOf("\n\n  {{ nothing.attr }}"), "[template] t.jinja:3:13: 'nothing' is undefined");
  EXPECT_EQ(ErrorOf("{{ 1 / 0 }}"), "[template] t.jinja:1:6: division by zero");
  EXPECT_EQ(ErrorOf("{% for x in none %}{% endfor %}"),
            "[template] t.jinja:1:13: 'NoneType' object is not iterable");
  EXPECT_EQ(ErrorOf("{{ [].append(1) }}"),
            "[template] t.jinja:1:6: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(ErrorOf("{% set d = {} %}{% set d.x = 1 %}"),
            "[template] t.jinja:1:20: cannot assign attribute on non-namespace object");
}

TEST(JinjaErrors, RunawayTemplatesStop) {
  TemplateOptions small;
  small.limits.max_steps = 100000;
  small.limits.max_output_bytes = 1 << 20;
  // Unbounded recursion.
  EXPECT_NE(ErrorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("recursion"),
            std::string::npos);
  // Nested loops past the step budget.
  EXPECT_NE(
      ErrorOf("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}", small)
          .find("evaluation steps"),
      std::string::npos);
  // Output and string growth.
  EXPECT_NE(
      ErrorOf("{% for a in range(5000) %}{{ 'x' * 1000 }}{% endfor %}", small).find("exceeds"),
      std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x' * 10000000000 }}", small).find("too large"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ range(100001) }}").find("MAX_RANGE"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 2 ** 200 }}").find("overflow"), std::string::npos);
  // Deep nesting is refused at parse time instead of overflowing the stack.
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("too deep"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}").find("too deep"),
      std::string::npos);
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  EXPECT_NE(ErrorOf(ifs).find("too deep"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '-') + "1 }}").find("too deep"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(3000, 'n') + " }}"), "x");  // a long name is fine
  // Data nested without bound (each level a new list, dict, namespace or bound method).
  for (const char* wrap :
       {"[ns.x]", "{'k': ns.x}", "dict(a=ns.x)", "namespace(a=ns.x)", "(ns.x, 1)", "[ns.x.copy]"}) {
    const std::string src =
        std::string("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}") +
        "{% set ns.x = " + wrap + " %}{% endfor %}{{ ns.x == ns.x }}";
    EXPECT_NE(ErrorOf(src).find("nested deeper"), std::string::npos) << wrap;
  }
  // A namespace that contains itself prints without recursing forever.
  EXPECT_NE(ErrorOf("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("recursion"),
            std::string::npos);
}

TEST(JinjaErrors, ChatTemplateApiErrors) {
  const ChatTemplate t = ChatTemplate::Parse("{{ messages|length }}", "x");
  EXPECT_THROW(t.Render(nlohmann::ordered_json::object(), nullptr, false), tq::Error);
  EXPECT_THROW(t.Render(nlohmann::ordered_json::array(), "tools?", false), tq::Error);
  EXPECT_EQ(t.Render(nlohmann::ordered_json::array(), nullptr, false), "0");
  // Hostile input: JSON nested 100000 deep is refused, not recursed into.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto msgs = nlohmann::ordered_json::array({nlohmann::ordered_json::parse(deep)});
  try {
    t.Render(msgs, nullptr, false);
    FAIL();
  } catch (const tq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate::Parse("{% if %}");
    FAIL();
  } catch (const tq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template:1:7:"), std::string::npos) << e.what();
  }
}

// Bytes that are not UTF-8, NULs and lone delimiters are data, not crashes.
TEST(JinjaErrors, OddBytes) {
  const std::string src = std::string("a\0b\xff\xfe{", 7) + "} { % } %} #}";
  EXPECT_EQ(Template::Parse(src, "t").Render(Dict()), src);
  EXPECT_EQ(Template::Parse("{{ '\xff' ~ 'é'|upper }}", "t").Render(Dict()), "\xff\xc3\x89");
}

}  // namespace
}  // namespace tq::jinja
