// Typed access to the fields of a JSON object with errors that name the file and the field
// ("[config <file>] field 'x': expected an integer, got string"). JSON null counts as absent,
// as it does for the Hugging Face config classes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tq {

// Parses `text` as JSON; a syntax error -> tq::Error(where, "invalid JSON: ...").
nlohmann::json ParseJson(const std::string& text, const std::string& where);

class JsonFields {
 public:
  // `obj` must outlive this; `prefix` is prepended to field names in errors ("rope_scaling.").
  JsonFields(const nlohmann::json& obj, std::string where, std::string prefix = "");

  bool Has(const std::string& key) const;                   // present and not null
  const nlohmann::json* Get(const std::string& key) const;  // nullptr when absent or null

  std::optional<int64_t> Int(const std::string& key) const;
  std::optional<double> Double(const std::string& key) const;  // accepts integers
  std::optional<bool> Bool(const std::string& key) const;
  std::optional<std::string> String(const std::string& key) const;
  // An integer or a list of integers (eos_token_id); empty when absent.
  std::vector<int64_t> IntOrList(const std::string& key) const;
  std::vector<int64_t> IntList(const std::string& key) const;  // empty when absent

  int64_t RequireInt(const std::string& key) const;
  double RequireDouble(const std::string& key) const;

  [[noreturn]] void FailField(const std::string& key, const std::string& what) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& obj_;
  std::string where_, prefix_;
};

}  // namespace tq
