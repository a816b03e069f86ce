// Chat templates: a model's Jinja template rendered the way Hugging Face's
// apply_chat_template renders it (trim_blocks, lstrip_blocks, loop controls, its tojson,
// raise_exception and strftime_now).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace tq {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses once; syntax errors throw tq::Error with "<name>:line:col: message".
  static ChatTemplate Parse(const std::string& source, const std::string& name = "chat_template");

  // messages: JSON array of {role, content (string or list of parts), tool_calls...};
  // tools: JSON array or null (the template sees `tools` = None then).
  // extra: additional variables (bos_token, eos_token, date_string, ...), which override.
  // raise_exception() and any failure -> tq::Error with the message and template position.
  // Use the ordered_json overload to keep object key order as written (tojson prints it).
  std::string Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  std::string Render(const nlohmann::json& messages, const nlohmann::json& tools,
                     bool add_generation_prompt,
                     const nlohmann::json& extra = nlohmann::json::object()) const;

  const std::string& name() const;

 private:
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace tq
