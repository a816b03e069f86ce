// Code formats of quantized tensors: how many levels a code has and how codes are packed into
// bytes. One traits row per format (ggml style); the exact bit layouts are in packing.h and
// docs/FORMAT.md ("Packing"). Kernels, the converter and the KV codec all read these traits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tq::quant {

enum class CodeFormat : uint8_t {
  kQ1 = 0,       // 2 levels, 1 bit
  kQ2 = 1,       // 4 levels, 2 bits
  kQ3 = 2,       // 8 levels, 3 bits: a 2-bit plane + a 1-bit plane per 32 codes
  kQ4 = 3,       // 16 levels, 4 bits
  kQ8 = 4,       // 256 levels, 8 bits
  kTernary = 5,  // 3 levels, base-3: 5 trits per byte (1.6 bits)
};
inline constexpr int kNumCodeFormats = 6;

// Packing unit: `codes_per_unit` consecutive codes of one row occupy `bytes_per_unit` bytes.
// Rows are packed independently (a row never shares a byte with the next row). For the binary
// formats the last unit of a row is zero-padded; ternary's last chunk is shortened instead
// (PackedBytes is exactly ceil(n / 5) bytes), see packing.h.
struct FormatTraits {
  CodeFormat format;
  std::string_view name;  // "q1", "q2", "q3", "q4", "q8", "ternary"
  int levels;             // codebook size: code values are 0 .. levels-1
  int code_bits;          // bits of one code in a full unit (ternary: 0, see bits_per_code)
  int codes_per_unit;
  int bytes_per_unit;
  double bits_per_code;  // storage cost in a full unit: 8 * bytes_per_unit / codes_per_unit
};

inline constexpr FormatTraits kFormatTraits[kNumCodeFormats] = {
    {CodeFormat::kQ1, "q1", 2, 1, 32, 4, 1.0},
    {CodeFormat::kQ2, "q2", 4, 2, 32, 8, 2.0},
    {CodeFormat::kQ3, "q3", 8, 3, 32, 12, 3.0},
    {CodeFormat::kQ4, "q4", 16, 4, 32, 16, 4.0},
    {CodeFormat::kQ8, "q8", 256, 8, 32, 32, 8.0},
    {CodeFormat::kTernary, "ternary", 3, 0, 160, 32, 1.6},
};

constexpr const FormatTraits& Traits(CodeFormat f) { return kFormatTraits[static_cast<int>(f)]; }

// Unit layouts as structs, so that kernels can index them (`static_assert`ed sizes).
// Codes c[0..31] of one 32-code unit:
struct BlockQ1 {
  uint8_t bits[4];  // uint32 little-endian: bit j = c[j]
};
struct BlockQ2 {
  uint8_t qs[8];  // qs[j] = c[j] | c[j+8] << 2 | c[j+16] << 4 | c[j+24] << 6
};
struct BlockQ3 {
  uint8_t lo[8];  // the low 2 bits of each code, laid out as BlockQ2
  uint8_t hi[4];  // uint32 little-endian: bit j = bit 2 of c[j]
};
struct BlockQ4 {
  uint8_t qs[16];  // qs[j] = c[j] | c[j+16] << 4
};
struct BlockQ8 {
  uint8_t qs[32];  // qs[j] = c[j]
};
// 160 trits t[0..159]: qs[j] holds t[j], t[j+32], t[j+64], t[j+96], t[j+128] (see packing.h).
struct BlockTernary {
  uint8_t qs[32];
};

static_assert(sizeof(BlockQ1) == Traits(CodeFormat::kQ1).bytes_per_unit);
static_assert(sizeof(BlockQ2) == Traits(CodeFormat::kQ2).bytes_per_unit);
static_assert(sizeof(BlockQ3) == Traits(CodeFormat::kQ3).bytes_per_unit);
static_assert(sizeof(BlockQ4) == Traits(CodeFormat::kQ4).bytes_per_unit);
static_assert(sizeof(BlockQ8) == Traits(CodeFormat::kQ8).bytes_per_unit);
static_assert(sizeof(BlockTernary) == Traits(CodeFormat::kTernary).bytes_per_unit);
static_assert(Traits(CodeFormat::kTernary).codes_per_unit == 5 * sizeof(BlockTernary));
// Every table row is at its enum's index, and binary formats store exactly code_bits per code.
constexpr bool TraitsTableConsistent() {
  for (int i = 0; i < kNumCodeFormats; ++i) {
    const FormatTraits& t = kFormatTraits[i];
    if (static_cast<int>(t.format) != i) return false;
    if (t.code_bits > 0 &&
        (t.bytes_per_unit * 8 != t.code_bits * t.codes_per_unit || t.levels != (1 << t.code_bits)))
      return false;
    if (t.bits_per_code * t.codes_per_unit != 8.0 * t.bytes_per_unit) return false;
  }
  return true;
}
static_assert(TraitsTableConsistent());

// The binary format with `bits` bits per code (1, 2, 3, 4, 8); nullopt otherwise.
std::optional<CodeFormat> FormatForBits(int bits);
// The format whose codebook has `levels` entries (2, 3, 4, 8, 16, 256) — what a loader uses to
// read the bit width from a stored codebook; nullopt otherwise.
std::optional<CodeFormat> FormatForLevels(int levels);
// By name ("q4", "ternary", ...); nullopt if unknown.
std::optional<CodeFormat> FormatFromName(std::string_view name);

}  // namespace tq::quant
