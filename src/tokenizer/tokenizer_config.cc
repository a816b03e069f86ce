#include "tokenizer/tokenizer_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tq {
namespace {

using Json = nlohmann::ordered_json;

std::optional<std::string> TokenContent(const Json& j, const char* field,
                                        const std::string& where) {
  if (!j.contains(field) || j[field].is_null()) return std::nullopt;
  const Json& v = j[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  Fail(where, "field '{}' must be a string, null or an AddedToken object with a string 'content'",
       field);
}

bool BoolField(const Json& j, const char* field, const std::string& where) {
  if (!j.contains(field) || j[field].is_null()) return false;
  if (!j[field].is_boolean()) Fail(where, "field '{}' must be a boolean", field);
  return j[field].get<bool>();
}

void ReadTemplates(const Json& t, TokenizerConfig& c, const std::string& where) {
  if (t.is_null()) return;
  if (t.is_string()) {
    c.chat_template = t.get<std::string>();
    return;
  }
  if (t.is_object()) {  // {"default": "...", "tool_use": "..."}, the in-memory form
    for (auto it = t.begin(); it != t.end(); ++it) {
      if (!it.value().is_string()) Fail(where, "chat_template['{}'] must be a string", it.key());
      c.named_templates[it.key()] = it.value().get<std::string>();
      if (it.key() == "default") c.chat_template = it.value().get<std::string>();
    }
    return;
  }
  if (!t.is_array())
    Fail(where, "field 'chat_template' must be a string or a list of {{name, template}}");
  for (size_t i = 0; i < t.size(); ++i) {
    const Json& e = t[i];
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        !e.contains("template") || !e["template"].is_string())
      Fail(where, "chat_template[{}] must be an object with string 'name' and 'template'", i);
    const std::string name = e["name"].get<std::string>();
    c.named_templates[name] = e["template"].get<std::string>();
    if (name == "default") c.chat_template = c.named_templates[name];
  }
}

}  // namespace

TokenizerConfig ParseTokenizerConfig(const std::string& json_text, const std::string& where) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, "invalid JSON: {}", e.what());
  }
  if (!j.is_object()) Fail(where, "expected a JSON object at the top level");
  TokenizerConfig c;
  c.bos_token = TokenContent(j, "bos_token", where);
  c.eos_token = TokenContent(j, "eos_token", where);
  c.pad_token = TokenContent(j, "pad_token", where);
  c.unk_token = TokenContent(j, "unk_token", where);
  c.add_bos_token = BoolField(j, "add_bos_token", where);
  c.add_eos_token = BoolField(j, "add_eos_token", where);
  if (j.contains("chat_template")) ReadTemplates(j["chat_template"], c, where);
  return c;
}

TokenizerConfig LoadTokenizerConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  TokenizerConfig c;
  const fs::path cfg = dir / "tokenizer_config.json";
  if (fs::exists(cfg)) c = ParseTokenizerConfig(ReadFileToString(cfg.string()), cfg.string());
  if (c.chat_template.empty() && c.named_templates.empty()) {
    const fs::path jinja = dir / "chat_template.jinja";
    const fs::path json = dir / "chat_template.json";
    if (fs::exists(jinja)) {
      c.chat_template = ReadFileToString(jinja.string());
    } else if (fs::exists(json)) {
      Json j;
      try {
        j = Json::parse(ReadFileToString(json.string()));
      } catch (const nlohmann::json::exception& e) {
        Fail(json.string(), "invalid JSON: {}", e.what());
      }
      if (!j.is_object() || !j.contains("chat_template"))
        Fail(json.string(), "expected an object with a 'chat_template' field");
      ReadTemplates(j["chat_template"], c, json.string());
    }
  }
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra)) {
    for (const auto& e : fs::directory_iterator(extra)) {
      if (e.path().extension() != ".jinja") continue;
      c.named_templates.emplace(e.path().stem().string(), ReadFileToString(e.path().string()));
    }
  }
  return c;
}

const std::string& SelectChatTemplate(const TokenizerConfig& config, bool has_tools,
                                      const std::string& name) {
  if (!name.empty()) {
    auto it = config.named_templates.find(name);
    if (it != config.named_templates.end()) return it->second;
    if (name == "default" && !config.chat_template.empty()) return config.chat_template;
    std::string known;
    for (auto& [k, v] : config.named_templates) known += (known.empty() ? "" : ", ") + k;
    Fail("chat template", "no template named '{}' (the model has: {})", name,
         known.empty() ? "none" : known);
  }
  if (has_tools) {
    auto it = config.named_templates.find("tool_use");
    if (it != config.named_templates.end()) return it->second;
  }
  if (!config.chat_template.empty()) return config.chat_template;
  Fail("chat template",
       "the model has no chat template (tokenizer_config.json 'chat_template' or "
       "chat_template.jinja); pass one explicitly");
}

}  // namespace tq
