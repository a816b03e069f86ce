#include "core/dtype.h"

#include <array>
#include <utility>

namespace tq {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 12> kNames = {{
    {DType::F64, "F64"},
    {DType::F32, "F32"},
    {DType::F16, "F16"},
    {DType::BF16, "BF16"},
    {DType::I64, "I64"},
    {DType::I32, "I32"},
    {DType::I16, "I16"},
    {DType::I8, "I8"},
    {DType::U8, "U8"},
    {DType::U32, "U32"},
    {DType::BOOL, "BOOL"},
    {DType::F8_E4M3, "F8_E4M3"},
}};
}  // namespace

std::string_view DTypeName(DType t) {
  for (const auto& [d, n] : kNames)
    if (d == t) return n;
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& [d, n] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

}  // namespace tq
