#include "tokenizer/chat_template.h"

#include "core/error.h"
#include "tokenizer/jinja/template.h"

namespace tq {

ChatTemplate ChatTemplate::Parse(const std::string& source, const std::string& name) {
  jinja::TemplateOptions options;
  // transformers: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, ...).
  options.trim_blocks = true;
  options.lstrip_blocks = true;
  ChatTemplate t;
  t.template_ =
      std::make_shared<const jinja::Template>(jinja::Template::Parse(source, name, options));
  return t;
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) Fail(name(), "messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) Fail(name(), "tools must be a JSON array or null");
  if (!extra.is_object()) Fail(name(), "extra variables must be a JSON object");
  jinja::Dict vars;
  try {
    vars.Set(jinja::Value("messages"), jinja::Value::FromJson(messages));
    vars.Set(jinja::Value("tools"), jinja::Value::FromJson(tools));
    vars.Set(jinja::Value("documents"), jinja::Value::None());
    vars.Set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
    for (auto it = extra.begin(); it != extra.end(); ++it)
      vars.Set(jinja::Value(it.key()), jinja::Value::FromJson(it.value()));
  } catch (const jinja::RenderError& e) {
    Fail(name(), "input: {}", e.message);
  }
  return template_->Render(vars);
}

std::string ChatTemplate::Render(const nlohmann::json& messages, const nlohmann::json& tools,
                                 bool add_generation_prompt, const nlohmann::json& extra) const {
  return Render(nlohmann::ordered_json(messages), nlohmann::ordered_json(tools),
                add_generation_prompt, nlohmann::ordered_json(extra));
}

const std::string& ChatTemplate::name() const { return template_->name(); }

}  // namespace tq
