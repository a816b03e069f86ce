#include "io/hub_formats.h"

#include <cmath>

#include "core/error.h"

namespace tq {
namespace {

int64_t Product(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
  return n;
}

}  // namespace

float E2m1ToF32(uint8_t code) {
  static constexpr float kLut[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kLut[code & 0x0F];
}

float E4m3ToF32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0x0F, man = b & 0x07;
  if (exp == 0x0F && man == 0x07) return NAN;
  float v = exp == 0 ? std::ldexp(float(man) / 8.0f, -6)  // subnormal
                     : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return sign ? -v : v;
}

Shape Mxfp4Shape(const Shape& blocks, const Shape& scales, const std::string& name) {
  const std::string where = "mxfp4 " + name;
  if (blocks.size() < 2 || blocks.back() != 16)
    Fail(where, "blocks must be [..., groups, 16] (32 e2m1 values per block), got {}",
         ShapeToString(blocks));
  if (scales.size() != blocks.size() - 1 ||
      !std::equal(scales.begin(), scales.end(), blocks.begin()))
    Fail(where, "scales {} do not match blocks {} (expected one e8m0 per block: {})",
         ShapeToString(scales), ShapeToString(blocks),
         ShapeToString(Shape(blocks.begin(), blocks.end() - 1)));
  Shape out(blocks.begin(), blocks.end() - 1);
  out.back() *= 32;
  return out;
}

void DequantizeMxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                     const Shape& blocks_shape, const Shape& scales_shape, const std::string& name,
                     std::span<float> out) {
  const std::string where = "mxfp4 " + name;
  const Shape shape = Mxfp4Shape(blocks_shape, scales_shape, name);
  const int64_t num_blocks = Product(scales_shape);
  if (int64_t(blocks.size()) != num_blocks * 16 || int64_t(scales.size()) != num_blocks)
    Fail(where, "{} block bytes and {} scale bytes for {} blocks", blocks.size(), scales.size(),
         num_blocks);
  if (int64_t(out.size()) != Product(shape))
    Fail(where, "output holds {} floats, {} needed", out.size(), Product(shape));
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t s = scales[size_t(b)];
    if (s == 0xFF) Fail(where, "block {} has the NaN scale 0xFF", b);
    // 2^(s − 127) (subnormal below 2^-126: still exact), then every e2m1 value times it: a
    // power-of-two product, so exact wherever ldexp of each value would be.
    const float scale = std::ldexp(1.0f, int(s) - 127);
    const uint8_t* src = blocks.data() + b * 16;
    float* dst = out.data() + b * 32;
    for (int i = 0; i < 16; ++i) {
      dst[2 * i] = E2m1ToF32(src[i] & 0x0F) * scale;
      dst[2 * i + 1] = E2m1ToF32(src[i] >> 4) * scale;
    }
  }
}

void CheckFp8BlockScales(const Shape& weight, const Shape& scale_inv, int64_t block_rows,
                         int64_t block_cols, const std::string& name) {
  const std::string where = "fp8 " + name;
  if (weight.size() != 2) Fail(where, "weight must be 2-D, got {}", ShapeToString(weight));
  if (block_rows <= 0 || block_cols <= 0)
    Fail(where, "block size must be positive, got [{}, {}]", block_rows, block_cols);
  const Shape want = {(weight[0] + block_rows - 1) / block_rows,
                      (weight[1] + block_cols - 1) / block_cols};
  if (scale_inv != want)
    Fail(where, "weight_scale_inv is {}, expected {} for weight {} in [{}, {}] blocks",
         ShapeToString(scale_inv), ShapeToString(want), ShapeToString(weight), block_rows,
         block_cols);
}

void DequantizeFp8Block(std::span<const uint8_t> weight, std::span<const float> scale_inv,
                        const Shape& weight_shape, const Shape& scale_shape, int64_t block_rows,
                        int64_t block_cols, const std::string& name, std::span<float> out) {
  CheckFp8BlockScales(weight_shape, scale_shape, block_rows, block_cols, name);
  const std::string where = "fp8 " + name;
  const int64_t rows = weight_shape[0], cols = weight_shape[1], sc = scale_shape[1];
  if (int64_t(weight.size()) != rows * cols || int64_t(out.size()) != rows * cols ||
      int64_t(scale_inv.size()) != scale_shape[0] * sc)
    Fail(where, "buffer sizes ({} weight bytes, {} scales, {} outputs) do not match {}",
         weight.size(), scale_inv.size(), out.size(), ShapeToString(weight_shape));
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scale_inv.data() + (r / block_rows) * sc;
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t b = weight[size_t(r * cols + c)];
      if ((b & 0x7F) == 0x7F) Fail(where, "NaN at [{}, {}]", r, c);
      out[size_t(r * cols + c)] = E4m3ToF32(b) * srow[c / block_cols];
    }
  }
}

}  // namespace tq
