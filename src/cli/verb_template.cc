// turboquant template: renders a chat with the model's chat template, exactly as Hugging Face's
// apply_chat_template(..., tokenize=False) would, and prints it with nothing appended.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_config.h"

namespace {

nlohmann::ordered_json ReadJson(const std::string& path) {
  const std::string text = tq::ReadFileToString(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    tq::Fail(path, "invalid JSON: {}", e.what());
  }
}

int Run(int argc, char** argv) {
  CLI::App app{"Render a chat with the model's chat template (as apply_chat_template does)",
               argv[0]};
  std::string model, messages_path, tools_path, template_path;
  bool add_generation_prompt = false;
  app.add_option("-m,--model", model,
                 "Model directory (tokenizer_config.json / chat_template.jinja; $TURBOQUANT_MODEL)")
      ->envname("TURBOQUANT_MODEL");
  app.add_option("--messages", messages_path,
                 "JSON file: an array of {role, content, ...} messages")
      ->required();
  app.add_option("--tools", tools_path, "JSON file: an OpenAI-style list of tools");
  app.add_option("--template", template_path, "A .jinja file that replaces the model's template");
  app.add_flag("--add-generation-prompt", add_generation_prompt,
               "End with the assistant turn's opening");
  tq::cli::SetExamples(
      app,
      {"turboquant template -m models/tq-llama-21m --messages chat.json --add-generation-prompt",
       "turboquant template --template my.jinja --messages chat.json --tools tools.json"});
  return tq::cli::RunApp(app, argc, argv, [&] {
    if (model.empty() && template_path.empty())
      throw tq::UsageError("template", "give --model DIR (or at least --template FILE.jinja)");
    tq::TokenizerConfig config;
    if (!model.empty()) config = tq::LoadTokenizerConfig(tq::cli::ResolveModelDir(model));

    nlohmann::ordered_json messages = ReadJson(messages_path);
    if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
    if (!messages.is_array()) tq::Fail(messages_path, "expected a JSON array of messages");
    nlohmann::ordered_json tools = nullptr;
    if (!tools_path.empty()) {
      tools = ReadJson(tools_path);
      if (!tools.is_array()) tq::Fail(tools_path, "expected a JSON array of tools");
    }

    std::string source, name;
    if (!template_path.empty()) {
      source = tq::ReadFileToString(template_path);
      name = template_path;
    } else {
      source = tq::SelectChatTemplate(config, !tools.is_null());
      name = "chat_template";
    }
    // The special tokens Hugging Face passes to every template (special_tokens_map).
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (config.bos_token) extra["bos_token"] = *config.bos_token;
    if (config.eos_token) extra["eos_token"] = *config.eos_token;
    if (config.unk_token) extra["unk_token"] = *config.unk_token;
    if (config.pad_token) extra["pad_token"] = *config.pad_token;

    const tq::ChatTemplate tmpl = tq::ChatTemplate::Parse(source, name);
    const std::string out = tmpl.Render(messages, tools, add_generation_prompt, extra);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return tq::cli::kExitOk;
  });
}

tq::cli::VerbRegistrar reg("template", "Render a chat with the model's chat template", &Run);

}  // namespace
