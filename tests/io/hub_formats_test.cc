// MXFP4 (GPT-OSS *_blocks / *_scales) and FP8 block-scaled (DeepSeek-V3 weight_scale_inv)
// layouts: small safetensors files written in those layouts, read back and dequantized against
// values computed by hand; every malformed shape, size or NaN code is a clear error.
#include "io/hub_formats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "testutil/error_of.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

using ::testing::HasSubstr;

using test::ErrorOf;

TEST(HubFormats, E2m1AndE4m3Codes) {
  const float e2m1[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0f, -.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(E2m1ToF32(uint8_t(c)), e2m1[c]) << c;
  EXPECT_EQ(E4m3ToF32(0x00), 0.0f);
  EXPECT_EQ(E4m3ToF32(0x38), 1.0f);  // exp 7, man 0
  EXPECT_EQ(E4m3ToF32(0x3C), 1.5f);  // man 4
  EXPECT_EQ(E4m3ToF32(0xB8), -1.0f);
  EXPECT_EQ(E4m3ToF32(0x7E), 448.0f);                // the largest finite E4M3FN
  EXPECT_EQ(E4m3ToF32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal: 1/8 · 2^-6
  EXPECT_TRUE(std::isnan(E4m3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(E4m3ToF32(0xFF)));
}

// GPT-OSS layout: [E, rows, G, 16] blocks and [E, rows, G] scales in one file.
TEST(HubFormats, Mxfp4FileRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const int64_t E = 2, rows = 3, G = 2;
  std::vector<uint8_t> blocks(size_t(E * rows * G * 16)), scales(size_t(E * rows * G));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = uint8_t(i * 37 + 11);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(120 + i % 10);
  {
    SafetensorsWriter w(path);
    w.Declare("model.layers.0.mlp.experts.gate_up_proj_blocks", DType::U8, {E, rows, G, 16});
    w.Declare("model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {E, rows, G});
    w.WriteTensor("model.layers.0.mlp.experts.gate_up_proj_blocks", blocks.data(), blocks.size());
    w.WriteTensor("model.layers.0.mlp.experts.gate_up_proj_scales", scales.data(), scales.size());
    w.Finish();
  }
  const auto f = SafetensorsFile::Open(path);
  const TensorView b = f->View("model.layers.0.mlp.experts.gate_up_proj_blocks");
  const TensorView s = f->View("model.layers.0.mlp.experts.gate_up_proj_scales");
  const Shape shape = Mxfp4Shape(b.shape, s.shape, "gate_up_proj");
  EXPECT_EQ(shape, (Shape{E, rows, G * 32}));
  std::vector<float> out(size_t(NumElements(shape)));
  DequantizeMxfp4({b.bytes(), b.nbytes()}, {s.bytes(), s.nbytes()}, b.shape, s.shape,
                  "gate_up_proj", out);
  for (int64_t blk = 0; blk < E * rows * G; ++blk) {
    const float scale = std::ldexp(1.0f, int(scales[size_t(blk)]) - 127);
    for (int i = 0; i < 16; ++i) {
      const uint8_t byte = blocks[size_t(blk * 16 + i)];
      ASSERT_EQ(out[size_t(blk * 32 + 2 * i)], E2m1ToF32(byte & 15) * scale);
      ASSERT_EQ(out[size_t(blk * 32 + 2 * i + 1)], E2m1ToF32(byte >> 4) * scale);
    }
  }
}

TEST(HubFormats, Mxfp4Errors) {
  std::vector<uint8_t> blocks(32), scales(2);
  std::vector<float> out(64);
  EXPECT_THAT(ErrorOf([&] {
                Mxfp4Shape({2, 15}, {2}, "w");
              }),
              HasSubstr("[mxfp4 w] blocks must be [..., groups, 16]"));
  EXPECT_THAT(ErrorOf([&] { Mxfp4Shape({2, 16}, {3}, "w"); }), HasSubstr("do not match"));
  EXPECT_THAT(ErrorOf([&] {
                DequantizeMxfp4({blocks.data(), 16}, scales, {2, 16}, {2}, "w", out);
              }),
              HasSubstr("16 block bytes"));
  EXPECT_THAT(ErrorOf([&] {
                DequantizeMxfp4(blocks, scales, {2, 16}, {2}, "w", {out.data(), 10});
              }),
              HasSubstr("output holds 10 floats"));
  scales[1] = 0xFF;
  EXPECT_THAT(ErrorOf([&] {
                DequantizeMxfp4(blocks, scales, {2, 16}, {2}, "w", out);
              }),
              HasSubstr("block 1 has the NaN scale"));
}

// DeepSeek-V3 layout: F8_E4M3 weight [rows, cols] + fp32 weight_scale_inv over 2x3 blocks
// (awkward: rows and cols not multiples of the block).
TEST(HubFormats, Fp8BlockFileRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const int64_t rows = 5, cols = 7, br = 2, bc = 3;
  const Shape sshape = {3, 3};
  std::vector<uint8_t> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t((i * 29 + 3) & 0x7E);  // no NaN codes
  std::vector<float> sinv(9);
  for (size_t i = 0; i < sinv.size(); ++i) sinv[i] = 0.25f * float(i + 1);
  {
    SafetensorsWriter wr(path);
    wr.Declare("model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {rows, cols});
    wr.Declare("model.layers.0.mlp.down_proj.weight_scale_inv", DType::F32, sshape);
    wr.WriteTensor("model.layers.0.mlp.down_proj.weight", w.data(), w.size());
    wr.WriteTensor("model.layers.0.mlp.down_proj.weight_scale_inv", sinv.data(), sinv.size() * 4);
    wr.Finish();
  }
  const auto f = SafetensorsFile::Open(path);
  const TensorView wv = f->View("model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(wv.dtype, DType::F8_E4M3);
  const TensorView sv = f->View("model.layers.0.mlp.down_proj.weight_scale_inv");
  std::vector<float> out(size_t(rows * cols));
  DequantizeFp8Block({wv.bytes(), wv.nbytes()},
                     {static_cast<const float*>(sv.data), size_t(sv.numel())}, wv.shape, sv.shape,
                     br, bc, "down_proj", out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(out[size_t(r * cols + c)],
                E4m3ToF32(w[size_t(r * cols + c)]) * sinv[size_t((r / br) * 3 + c / bc)])
          << r << "," << c;
}

TEST(HubFormats, Fp8Errors) {
  std::vector<uint8_t> w(4, 0x38);
  std::vector<float> s(1, 1.0f), out(4);
  EXPECT_THAT(ErrorOf([&] {
                CheckFp8BlockScales({2, 2}, {2, 1}, 128, 128, "w");
              }),
              HasSubstr("[fp8 w] weight_scale_inv is [2, 1], expected [1, 1]"));
  EXPECT_THAT(ErrorOf([&] { CheckFp8BlockScales({4}, {1}, 128, 128, "w"); }),
              HasSubstr("must be 2-D"));
  EXPECT_THAT(ErrorOf([&] {
                CheckFp8BlockScales({2, 2}, {1, 1}, 0, 128, "w");
              }),
              HasSubstr("block size must be positive"));
  EXPECT_THAT(ErrorOf([&] {
                DequantizeFp8Block({w.data(), 3}, s, {2, 2}, {1, 1}, 128, 128, "w", out);
              }),
              HasSubstr("buffer sizes"));
  w[2] = 0xFF;
  EXPECT_THAT(ErrorOf([&] {
                DequantizeFp8Block(w, s, {2, 2}, {1, 1}, 128, 128, "w", out);
              }),
              HasSubstr("NaN at [1, 0]"));
}

}  // namespace
}  // namespace tq
