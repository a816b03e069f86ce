// `turboquant template`, `inspect --json` and `tokenize` / `detokenize` through the binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/run_cli.h"
#include "core/mapped_file.h"

namespace tq {
namespace {

using test::RunCli;
using test::ShellQuote;

TEST(CliTemplate, RendersExactlyWithoutTrailingNewline) {
  test::TempDir dir;
  test::WriteFile(dir.file("t.jinja"),
                  "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                  "{% if add_generation_prompt %}<assistant>{% endif %}{{ tools | tojson }}\n");
  test::WriteFile(dir.file("m.json"), R"([{"role": "user", "content": "hi"}])");
  test::WriteFile(dir.file("tools.json"),
                  R"([{"type": "function", "function": {"name": "f", "zz": 1, "aa": 2}}])");
  const auto r =
      RunCli("template --template " + dir.file("t.jinja") + " --messages " + dir.file("m.json") +
             " --tools " + dir.file("tools.json") + " --add-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  // HF's rendering strips the final newline of the template (keep_trailing_newline=False).
  EXPECT_EQ(r.out, R"(<user>hi<assistant>[{"type": "function", "function": {"name": "f", "zz": 1, )"
                   R"("aa": 2}}])");
  const auto none =
      RunCli("template --template " + dir.file("t.jinja") + " --messages " + dir.file("m.json"));
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "<user>hinull");
}

TEST(CliTemplate, ModelTemplateMatchesReference) {
  for (const char* name : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    const std::string model = test::ModelDir(name);
    const auto ref = nlohmann::json::parse(ReadFileToString(model + "/reference.json"));
    test::TempDir dir;
    test::WriteFile(dir.file("m.json"), ref["chat_messages"].dump());
    const auto r = RunCli("template --model " + model + " --messages " + dir.file("m.json") +
                          " --add-generation-prompt");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, ref["chat_rendered"].get<std::string>()) << name;
  }
}

TEST(CliTemplate, Errors) {
  test::TempDir dir;
  test::WriteFile(dir.file("m.json"), R"([{"role": "user", "content": "hi"}])");
  test::WriteFile(dir.file("raise.jinja"), "a{{ raise_exception('no system role here') }}");
  const auto raised = RunCli("template --template " + dir.file("raise.jinja") + " --messages " +
                             dir.file("m.json"));
  EXPECT_EQ(raised.code, 1);
  EXPECT_TRUE(raised.out.empty()) << raised.out;
  EXPECT_NE(raised.err.find("no system role here"), std::string::npos) << raised.err;
  const auto neither = RunCli("template --messages " + dir.file("m.json"));
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.err.find("--model"), std::string::npos) << neither.err;
  test::WriteFile(dir.file("bad.json"), "[{\"role\": ");
  const auto bad = RunCli("template --template " + dir.file("raise.jinja") + " --messages " +
                          dir.file("bad.json"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("bad.json"), std::string::npos) << bad.err;
}

TEST(CliInspect, JsonOfBothModels) {
  struct Want {
    const char* name;
    const char* model_type;
    int layers, hidden, tensors;
  };
  for (const Want& w : {Want{"tq-llama-21m", "llama", 6, 512, 56},
                        Want{"tq-qwen3moe-17m", "qwen3_moe", 6, 256, 632}}) {
    const auto r = RunCli("inspect --json --model " + test::ModelDir(w.name));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);  // stdout holds the JSON object alone
    EXPECT_EQ(j.at("model_type"), w.model_type) << w.name;
    EXPECT_EQ(j.at("num_layers"), w.layers) << w.name;
    EXPECT_EQ(j.at("hidden_size"), w.hidden) << w.name;
    EXPECT_EQ(j.at("tensors").at("count"), w.tensors) << w.name;
  }
  const auto missing = RunCli("inspect --json --model /nonexistent/dir");
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(missing.out.empty());
}

std::string IdList(const nlohmann::json& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(int(ids[i]));
  return s;
}

TEST(CliTokenize, RoundTripsReferenceCases) {
  for (const char* name : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    const std::string model = test::ModelDir(name);
    const auto ref = nlohmann::json::parse(ReadFileToString(model + "/reference.json"));
    ASSERT_FALSE(ref["tokenizer_cases"].empty());
    for (const auto& c : ref["tokenizer_cases"]) {
      const std::string text = c["text"];
      SCOPED_TRACE(std::string(name) + ": '" + text + "'");
      const auto enc = RunCli("tokenize --model " + model + " --text " + ShellQuote(text));
      ASSERT_EQ(enc.code, 0) << enc.err;
      EXPECT_EQ(enc.out, "[" + IdList(c["ids"], ", ") + "]\n");
      const auto raw =
          RunCli("tokenize --no-special --model " + model + " --text " + ShellQuote(text));
      ASSERT_EQ(raw.code, 0) << raw.err;
      EXPECT_EQ(raw.out, "[" + IdList(c["ids_no_special"], ", ") + "]\n");
      if (c["ids"].empty()) continue;
      const auto dec = RunCli("detokenize --model " + model + " --ids " + IdList(c["ids"], ","));
      ASSERT_EQ(dec.code, 0) << dec.err;
      EXPECT_EQ(dec.out, c["decoded"].get<std::string>() + "\n");
    }
  }
  const auto bad = RunCli("detokenize --model " + test::ModelDir("tq-llama-21m") + " --ids 1,x");
  EXPECT_EQ(bad.code, 2);
}

}  // namespace
}  // namespace tq
