#include "io/json_fields.h"

#include "core/error.h"

namespace tq {

nlohmann::json ParseJson(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    Fail(where, "invalid JSON: {}", e.what());
  }
}

JsonFields::JsonFields(const nlohmann::json& obj, std::string where, std::string prefix)
    : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {
  if (!obj_.is_object()) Fail(where_, "expected a JSON object, got {}", obj_.type_name());
}

void JsonFields::FailField(const std::string& key, const std::string& what) const {
  Fail(where_, "field '{}{}': {}", prefix_, key, what);
}

const nlohmann::json* JsonFields::Get(const std::string& key) const {
  const auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(const std::string& key) const { return Get(key) != nullptr; }

static std::optional<int64_t> ToInt(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > uint64_t(INT64_MAX)) return std::nullopt;
    return int64_t(j.get<uint64_t>());
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return std::nullopt;
}

std::optional<int64_t> JsonFields::Int(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return std::nullopt;
  const auto v = ToInt(*j);
  if (!v) FailField(key, fmt::format("expected an integer, got {} {}", j->type_name(), j->dump()));
  return v;
}

std::optional<double> JsonFields::Double(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return std::nullopt;
  if (!j->is_number()) FailField(key, fmt::format("expected a number, got {}", j->type_name()));
  return j->get<double>();
}

std::optional<bool> JsonFields::Bool(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return std::nullopt;
  if (!j->is_boolean()) FailField(key, fmt::format("expected true/false, got {}", j->type_name()));
  return j->get<bool>();
}

std::optional<std::string> JsonFields::String(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return std::nullopt;
  if (!j->is_string()) FailField(key, fmt::format("expected a string, got {}", j->type_name()));
  return j->get<std::string>();
}

std::vector<int64_t> JsonFields::IntList(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return {};
  if (!j->is_array())
    FailField(key, fmt::format("expected a list of integers, got {}", j->type_name()));
  std::vector<int64_t> out;
  for (const auto& e : *j) {
    const auto v = ToInt(e);
    if (!v) FailField(key, fmt::format("expected a list of integers, found {}", e.dump()));
    out.push_back(*v);
  }
  return out;
}

std::vector<int64_t> JsonFields::IntOrList(const std::string& key) const {
  const auto* j = Get(key);
  if (!j) return {};
  if (j->is_array()) return IntList(key);
  const auto v = ToInt(*j);
  if (!v)
    FailField(key, fmt::format("expected an integer or a list of integers, got {}", j->dump()));
  return {*v};
}

int64_t JsonFields::RequireInt(const std::string& key) const {
  const auto v = Int(key);
  if (!v) FailField(key, "required but missing");
  return *v;
}

double JsonFields::RequireDouble(const std::string& key) const {
  const auto v = Double(key);
  if (!v) FailField(key, "required but missing");
  return *v;
}

}  // namespace tq
