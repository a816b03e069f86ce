// e8 group scales (docs/FORMAT.md "Group scales"): one byte per group instead of an fp16 scale.
// The byte indexes a per-tensor table of 256 fp32 scales:
//   table[0] = 0                                   (all-zero groups)
//   table[e] = float(top · 2^((e − 255) / S))      e = 1 .. 255, a geometric grid
// `top` and the steps per octave `S` are chosen per tensor from the range of its groups' RMS
// (MakeE8ScaleTable). A reader only multiplies by table[code]; the grid is the converter's choice.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tq::quant {

inline constexpr int kE8TableSize = 256;

// How group scales are stored.
enum class ScaleFormat : uint8_t {
  kF16 = 0,  // one fp16 scale per group
  kE8 = 1,   // one byte per group + a per-tensor table of 256 fp32 scales (this file)
};
std::string_view ScaleFormatName(ScaleFormat f);  // "f16", "e8"

struct E8ScaleTable {
  std::array<float, kE8TableSize> values{};  // ascending; values[0] = 0
  float top = 0;                             // values[255]
  int steps_per_octave = 0;                  // S
};

// The grid for a tensor whose non-zero group RMS values lie in [rms_lo, rms_hi]:
// top = kE8TopMargin · rms_hi (an MSE-fitted scale can exceed the RMS), and S = the largest
// integer in [kE8MinSteps, kE8MaxSteps] with top · 2^(−254/S) <= kE8BottomMargin · rms_lo (the
// grid reaches below every group); S = kE8MinSteps when even that does not reach (groups below
// the grid get table[1] or 0, whichever fits better). rms_hi <= 0 (an all-zero tensor) gives
// top = 1, S = kE8MaxSteps.
inline constexpr double kE8TopMargin = 1.5;
inline constexpr double kE8BottomMargin = 0.5;
inline constexpr int kE8MinSteps = 8;
inline constexpr int kE8MaxSteps = 64;
E8ScaleTable MakeE8ScaleTable(double rms_lo, double rms_hi);

// The table for W [rows, cols] in groups of g (the range of its non-zero group RMS values).
E8ScaleTable E8ScaleTableFor(const float* w, int64_t rows, int64_t cols, int64_t g);

// Running range of non-zero group RMS values (for tensors quantized in row chunks).
struct GroupRmsRange {
  double lo = 0, hi = 0;  // hi == 0: no non-zero group seen
  void Add(const float* w, int64_t rows, int64_t cols, int64_t g);
  E8ScaleTable Table() const { return MakeE8ScaleTable(lo, hi); }
};

// The code whose table value is nearest to s on a log scale among 1..255 (0 for s <= 0).
uint8_t NearestE8Code(const E8ScaleTable& t, double s);

// Throws tq::Error naming `where` unless the n values are finite and non-negative and n == 256.
void ValidateE8ScaleTable(const float* table, int64_t n, std::string_view where);

}  // namespace tq::quant
