// PackedLinear: y = Ŵ'(R x) equals the dense product with the dequantized, un-rotated weights;
// a sharing group rotates once and gives the same results as separate calls.
#include "model/packed_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "quant/group_quantizer.h"
#include "quant/packing.h"

namespace tq {
namespace {

struct Made {
  quant::QuantizedMatrix q;
  std::unique_ptr<PackedLinear> linear;
  std::vector<float> dense;  // [out, in] = dequantized Ŵ' R
};

Made Make(int64_t out, int64_t in, quant::CodeFormat f,
          std::shared_ptr<const quant::HadamardRotation> rot, uint32_t seed, bool e8 = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> w(size_t(out * in));
  for (auto& v : w) v = nd(rng);
  if (rot) rot->ForwardRows(w.data(), out);
  quant::QuantSpec spec;
  spec.format = f;
  spec.group_size = 32;
  spec.scale.mode = quant::ScaleMode::kRms;
  if (e8) spec.scale_format = quant::ScaleFormat::kE8;
  Made m;
  m.q = quant::Quantize(w.data(), out, in, spec);
  m.dense.resize(w.size());
  quant::Dequantize(m.q, m.dense.data());
  if (rot) rot->InverseRows(m.dense.data(), out);
  kernels::PackedMatrix v;
  v.format = f;
  v.rows = out;
  v.cols = in;
  v.group_size = 32;
  v.codes = m.q.codes.data();
  v.row_bytes = int64_t(quant::PackedBytes(f, in));
  std::shared_ptr<const std::vector<float>> table;
  if (e8) {
    v.scale_codes = m.q.scale_codes.data();
    table = std::make_shared<const std::vector<float>>(m.q.scale_table);
  } else {
    v.scales = m.q.scales.data();
  }
  m.linear = std::make_unique<PackedLinear>(v, m.q.codebook, rot, std::vector<float>{}, table);
  m.linear->Upload(kernels::CpuBackend(), "test");
  return m;
}

std::vector<float> DenseProduct(const std::vector<float>& w, int64_t out, int64_t in,
                                const std::vector<float>& x, int64_t n) {
  std::vector<float> y(size_t(n * out));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += double(w[size_t(o * in + i)]) * x[size_t(t * in + i)];
      y[size_t(t * out + o)] = float(acc);
    }
  return y;
}

TEST(PackedLinear, EqualsDenseDequantizedProduct) {
  const int64_t in = 96;  // blockwise rotation: 3 blocks of 32
  auto rot = std::make_shared<quant::HadamardRotation>(quant::HadamardRotation::Make(in, 5));
  for (int e8 = 0; e8 < 2; ++e8)
    for (quant::CodeFormat f : {quant::CodeFormat::kQ2, quant::CodeFormat::kQ3,
                                quant::CodeFormat::kQ4, quant::CodeFormat::kTernary}) {
      const Made m = Make(40, in, f, rot, 1, e8 == 1);
      ASSERT_EQ(m.linear->matrix().e8_scales(), e8 == 1);
      std::mt19937 rng(2);
      std::normal_distribution<float> nd;
      for (int64_t n : {1, 5, 20, 40}) {
        std::vector<float> x(size_t(n * in)), y(size_t(n * 40));
        for (auto& v : x) v = nd(rng);
        m.linear->MatMul(kernels::CpuBackend(), x.data(), n, y.data());
        const std::vector<float> want = DenseProduct(m.dense, 40, in, x, n);
        // Up to 32 tokens (a batched decode step) may take the int8 decode kernels
        // (kernels/cpu/packed_decode.h; PackedLinear splits 8-32 rows into calls they take): error
        // about 1% of the output scale; more tokens the float path, or with the amx level bf16
        // tiles (two bf16 roundings per product, kernels/cpu/packed_matmul_amx.h): about 0.2%.
        double max_abs = 0;
        for (float v : want) max_abs = std::max(max_abs, double(std::fabs(v)));
        const double tol = n <= 32 ? 2e-2 * max_abs : 4e-3 * max_abs + 1e-3;
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], tol) << i;
      }
    }
}

TEST(PackedLinear, E8ScalesNeedAValidTable) {
  const Made m = Make(8, 64, quant::CodeFormat::kQ4, nullptr, 3, true);
  kernels::PackedMatrix v = m.linear->matrix();
  v.scale_table = nullptr;
  EXPECT_THROW(PackedLinear(v, m.q.codebook, nullptr, {}, nullptr), Error);
  std::vector<float> bad = m.q.scale_table;
  bad[9] = -2.0f;
  EXPECT_THROW(
      PackedLinear(v, m.q.codebook, nullptr, {}, std::make_shared<const std::vector<float>>(bad)),
      Error);
  bad.resize(255);
  EXPECT_THROW(
      PackedLinear(v, m.q.codebook, nullptr, {}, std::make_shared<const std::vector<float>>(bad)),
      Error);
}

TEST(PackedLinear, SharedGroupRotatesOnceWithTheSameResult) {
  const int64_t in = 128;
  auto rot = std::make_shared<quant::HadamardRotation>(quant::HadamardRotation::Make(in, 9));
  const Made a = Make(24, in, quant::CodeFormat::kQ4, rot, 3);
  const Made b = Make(8, in, quant::CodeFormat::kQ3, rot, 4);
  std::vector<float> x(size_t(3 * in));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  std::vector<float> ya(3 * 24), yb(3 * 8), sa(3 * 24), sb(3 * 8);
  a.linear->MatMul(kernels::CpuBackend(), x.data(), 3, ya.data());
  b.linear->MatMul(kernels::CpuBackend(), x.data(), 3, yb.data());
  const Linear* group[] = {a.linear.get(), b.linear.get()};
  float* outs[] = {sa.data(), sb.data()};
  ASSERT_TRUE(PackedMatMulShared(kernels::CpuBackend(), group, x.data(), 3, outs));
  EXPECT_EQ(ya, sa);
  EXPECT_EQ(yb, sb);
  // Different rotations: not a sharing group (MatMulShared falls back to separate calls).
  auto other = std::make_shared<quant::HadamardRotation>(quant::HadamardRotation::Make(in, 10));
  const Made c = Make(8, in, quant::CodeFormat::kQ3, other, 4);
  const Linear* mixed[] = {a.linear.get(), c.linear.get()};
  EXPECT_FALSE(PackedMatMulShared(kernels::CpuBackend(), mixed, x.data(), 3, outs));
}

TEST(PackedLinear, QuantizationBlockParsing) {
  EXPECT_FALSE(ParseQuantizationBlock(R"({"model_type": "llama"})", "cfg").has_value());
  const auto info = ParseQuantizationBlock(
      R"({"quantization": {"mode": "turboquant", "format_version": 1, "tensors": {
          "a": {"rotation_group": "g"}, "b": {"rotation_group": null}}}})",
      "cfg");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->rotation_group.at("a"), "g");
  EXPECT_EQ(info->rotation_group.at("b"), "");
  EXPECT_EQ(info->scale_table.at("a"), "a.scale_table");  // the default name
  const auto v2 = ParseQuantizationBlock(
      R"({"quantization": {"mode": "turboquant", "format_version": 2, "tensors": {
          "a": {"rotation_group": "g", "scales": "e8", "scale_table": "g.scale_table"}}}})",
      "cfg");
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->format_version, 2);
  EXPECT_EQ(v2->scale_table.at("a"), "g.scale_table");
  for (const char* bad :
       {R"({"quantization": {"mode": "turboquant", "format_version": 7, "tensors": {}}})",
        R"({"quantization": {"mode": "other", "format_version": 1, "tensors": {}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": "1", "tensors": {}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 1}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 1, "tensors": {"a": 3}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 1,
               "tensors": {"a": {"rotation_group": 5}}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 3, "tensors": {}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 2,
               "tensors": {"a": {"scale_table": 5}}}})",
        R"({"quantization": {"mode": "turboquant", "format_version": 2,
               "tensors": {"a": {"scale_table": ""}}}})",
        R"({"quantization": 1})", R"({"quantization": )"}) {
    EXPECT_THROW(ParseQuantizationBlock(bad, "cfg"), Error) << bad;
  }
}

}  // namespace
}  // namespace tq
