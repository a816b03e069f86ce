// Our engine against the real jinja2: templates/conformance.json holds small templates and the
// text jinja2 3.1 rendered for each (or the error it raised), in the environment transformers
// uses. Regenerate with templates/make_expected.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "templates/fixture_dir.h"
#include "tokenizer/jinja/template.h"

namespace tq::jinja {
namespace {

struct Case {
  std::string name, source, expected, error;
  nlohmann::ordered_json vars;
  bool hf = true;
};

std::vector<Case> LoadCases() {
  const auto j = nlohmann::ordered_json::parse(
      ReadFileToString(test::TemplateFixtureDir() + "/conformance.json"));
  std::vector<Case> out;
  for (const auto& c : j.at("cases")) {
    Case k;
    k.name = c.at("name").get<std::string>();
    k.source = c.at("template").get<std::string>();
    k.vars = c.at("vars");
    k.hf = c.at("hf").get<bool>();
    if (c.contains("expected")) k.expected = c.at("expected").get<std::string>();
    if (c.contains("error")) k.error = c.at("error").get<std::string>();
    out.push_back(std::move(k));
  }
  return out;
}

std::string RenderCase(const Case& c) {
  TemplateOptions o;
  o.trim_blocks = o.lstrip_blocks = c.hf;
  const Template t = Template::Parse(c.source, c.name, o);
  Dict vars;
  for (auto it = c.vars.begin(); it != c.vars.end(); ++it)
    vars.Set(Value(it.key()), Value::FromJson(it.value()));
  return t.Render(vars);
}

TEST(JinjaConformance, MatchesJinja2) {
  const std::vector<Case> cases = LoadCases();
  ASSERT_GT(cases.size(), 500u);
  int errors = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.source);
    if (c.error.empty()) {
      try {
        EXPECT_EQ(RenderCase(c), c.expected);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "unexpected error: " << e.what();
      }
    } else {
      ++errors;
      EXPECT_THROW(RenderCase(c), tq::Error) << "jinja2 raised " << c.error;
    }
  }
  EXPECT_GT(errors, 20);
}

// The raised message reaches the caller verbatim, with the position in the template.
TEST(JinjaConformance, RaiseExceptionMessage) {
  TemplateOptions o;
  const Template t = Template::Parse("ok\n  {{ raise_exception('bad ' ~ 1) }}", "t.jinja", o);
  try {
    t.Render(Dict());
    FAIL() << "no error";
  } catch (const tq::Error& e) {
    EXPECT_STREQ(e.what(), "[template] t.jinja:2:6: bad 1");
  }
}

}  // namespace
}  // namespace tq::jinja
