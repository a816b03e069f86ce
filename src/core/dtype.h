// Element types of tensors as safetensors names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tq {

// F8_E4M3: DeepSeek-V3 style fp8 weights, stored bytes that quant/hub_formats.h dequantizes (not
// IsFloat: nothing reads them as plain floats).
enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, U32, BOOL, F8_E4M3 };

// Bytes per element.
constexpr size_t DTypeSize(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::BOOL:
    case DType::F8_E4M3:
      return 1;
  }
  return 0;
}

// The safetensors spelling ("F32", "BF16", ...).
std::string_view DTypeName(DType t);
// Parses a safetensors dtype name; nullopt for unknown names.
std::optional<DType> ParseDType(std::string_view name);
inline bool IsFloat(DType t) {
  return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace tq
