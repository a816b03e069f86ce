// The server's chat path (request body -> ParseChatRequest -> ModelTextModel::RenderChat) keeps
// the key order of messages and tools as sent, and passes `tools` the way transformers does.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/model_config.h"
#include "runtime/model_engine.h"
#include "server/api_request.h"
#include "server/model_text_model.h"
#include "testutil/testutil.h"

namespace tq::server {
namespace {

namespace fs = std::filesystem;

// A copy of the llama model's tokenizer with `templates` (a tokenizer_config.json "chat_template"
// value: a string or a list of {name, template}).
class ChatRenderTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelTextModel> Load(const nlohmann::json& templates) {
    const std::string src = test::ModelDir("tq-llama-21m");
    for (const char* f : {"tokenizer.json", "config.json", "generation_config.json"}) {
      fs::copy_file(test::RequireFile(src + "/" + f), dir_.file(f));
    }
    nlohmann::json cfg = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    cfg["chat_template"] = templates;
    test::WriteFile(dir_.file("tokenizer_config.json"), cfg.dump());
    return ModelTextModel::Load(dir_.path().string(), LoadModelConfig(dir_.path().string()));
  }
  std::string Render(const ModelTextModel& m, const std::string& body) {
    const GenerationRequest r = ParseChatRequest(ParseJsonBody(body));
    return m.RenderChat(r.messages, r.tools, r.add_generation_prompt, r.template_kwargs);
  }
  test::TempDir dir_;
};

TEST_F(ChatRenderTest, ToolsAndMessagesKeepKeyOrder) {
  auto m = Load("{{ tools | tojson }}|{{ messages[0] | tojson }}");
  const std::string body = R"({"messages": [{"role": "user", "content": "hi", "zz": 1, "aa": 2}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
    "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}},
    "required": ["zeta"]}}}]})";
  EXPECT_EQ(Render(*m, body),
            R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", )"
            R"("properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, )"
            R"("required": ["zeta"]}}}]|{"role": "user", "content": "hi", "zz": 1, "aa": 2})");
}

TEST_F(ChatRenderTest, ToolsNoneWhenAbsentListWhenGiven) {
  auto m = Load(
      "{% if tools is none %}none{% else %}list:{{ tools | length }}{% endif %}"
      "{{ flag if flag is defined else '' }}");
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}]})"), "none");
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}], "tools": null})"),
            "none");
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})"),
            "list:0");
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}],
                          "tools": [{"type": "function", "function": {"name": "f"}}],
                          "chat_template_kwargs": {"flag": "!"}})"),
            "list:1!");
}

TEST_F(ChatRenderTest, ToolUseTemplateChosenForAnyToolsList) {
  auto m = Load(nlohmann::json::array({{{"name", "default"}, {"template", "plain"}},
                                       {{"name", "tool_use"}, {"template", "tools"}}}));
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}]})"), "plain");
  EXPECT_EQ(Render(*m, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})"),
            "tools");
}

}  // namespace
}  // namespace tq::server
