#include "quant/format.h"

namespace tq::quant {

std::optional<CodeFormat> FormatForBits(int bits) {
  switch (bits) {
    case 1:
      return CodeFormat::kQ1;
    case 2:
      return CodeFormat::kQ2;
    case 3:
      return CodeFormat::kQ3;
    case 4:
      return CodeFormat::kQ4;
    case 8:
      return CodeFormat::kQ8;
    default:
      return std::nullopt;
  }
}

std::optional<CodeFormat> FormatForLevels(int levels) {
  for (const FormatTraits& t : kFormatTraits)
    if (t.levels == levels) return t.format;
  return std::nullopt;
}

std::optional<CodeFormat> FormatFromName(std::string_view name) {
  for (const FormatTraits& t : kFormatTraits)
    if (t.name == name) return t.format;
  return std::nullopt;
}

}  // namespace tq::quant
