// Measures the quantizer on the real linear weights of tq-llama-21m (rotated as the converter
// will rotate them): MSE-optimal scales vs RMS scales vs affine, per bit width at group 64.
// The safetensors header is parsed here directly (a few lines) so that this test does not depend
// on the io layer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/mapped_file.h"
#include "quant/group_quantizer.h"
#include "quant/hadamard.h"
#include "testutil/testutil.h"

namespace tq::quant {
namespace {

struct Matrix {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};

std::vector<Matrix> LoadLinears(const std::string& path) {
  const MappedFile f = MappedFile::Open(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, f.data(), 8);
  const auto header = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(f.data()) + 8, size_t(header_len)));
  std::vector<Matrix> out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__" || info["shape"].size() != 2) continue;
    if (name.find("_proj.weight") == std::string::npos) continue;  // linears of the decoder
    EXPECT_EQ(info["dtype"], "BF16") << name;
    Matrix m;
    m.name = name;
    m.rows = info["shape"][0];
    m.cols = info["shape"][1];
    const uint64_t begin = info["data_offsets"][0];
    m.data.resize(size_t(m.rows * m.cols));
    Bf16ToF32(reinterpret_cast<const uint16_t*>(f.data() + 8 + header_len + begin), m.data.data(),
              m.data.size());
    out.push_back(std::move(m));
  }
  return out;
}

TEST(RealWeightsTest, MseScalesBeatRmsOnTqLlama21m) {
  std::vector<Matrix> linears =
      LoadLinears(test::RequireFile(test::ModelDir("tq-llama-21m") + "/model.safetensors"));
  ASSERT_EQ(linears.size(), 6u * 7u);
  // The first and last layer (14 of the 42 linears) keep the test short.
  std::erase_if(linears, [](const Matrix& m) {
    return m.name.find("layers.0.") == std::string::npos &&
           m.name.find("layers.5.") == std::string::npos;
  });
  ASSERT_EQ(linears.size(), 14u);
  for (Matrix& m : linears) HadamardRotation::Make(m.cols, 7).ForwardRows(m.data.data(), m.rows);

  struct Row {
    const char* label;
    QuantMethod method;
    ScaleMode scale;
  };
  const Row rows[] = {{"turboquant rms", QuantMethod::kCodebook, ScaleMode::kRms},
                      {"turboquant mse", QuantMethod::kCodebook, ScaleMode::kMseRefined},
                      {"turboquant search", QuantMethod::kCodebook, ScaleMode::kMseSearch},
                      {"affine", QuantMethod::kAffine, ScaleMode::kRms}};
  for (int bits : {2, 3, 4}) {
    double total[4] = {0, 0, 0, 0}, norm = 0;
    for (const Matrix& m : linears) {
      double err[4];
      for (int k = 0; k < 4; ++k) {
        QuantSpec spec;
        spec.method = rows[k].method;
        spec.scale.mode = rows[k].scale;
        spec.format = *FormatForBits(bits);
        spec.group_size = 64;
        const QuantError e = QuantizationError(m.data.data(), m.rows, m.cols, spec, m.name);
        err[k] = e.relative();
        total[k] += e.sq_error;
        if (k == 0) norm += e.sq_norm;
      }
      EXPECT_LE(err[1], err[0]) << m.name << " " << bits << " bits";
      EXPECT_LE(err[2], err[1]) << m.name << " " << bits << " bits";
    }
    std::printf(
        "tq-llama-21m linears, %d-bit g64, relative MSE: rms %.5f  mse-refined %.5f "
        "(%+.1f%%)  mse-search %.5f (%+.1f%%)  affine %.5f\n",
        bits, total[0] / norm, total[1] / norm, 100 * (total[1] / total[0] - 1), total[2] / norm,
        100 * (total[2] / total[0] - 1), total[3] / norm);
    EXPECT_LT(total[1], 0.985 * total[0]) << "MSE-optimal scales should lower the error visibly";
    if (bits >= 3) {
      EXPECT_LT(total[2], 0.97 * total[1]) << "the scale search should pay at " << bits;
    }
    if (bits <= 3) {
      EXPECT_LT(total[1], total[3]) << "TurboQuant beats affine at " << bits;
    }
  }
}

// Vector codebooks on the same rotated weights (slow: brute-force encoding; run with
// --gtest_also_run_disabled_tests to measure).
TEST(RealWeightsTest, DISABLED_VectorCodebooksOnTqLlama21m) {
  std::vector<Matrix> linears =
      LoadLinears(test::RequireFile(test::ModelDir("tq-llama-21m") + "/model.safetensors"));
  for (Matrix& m : linears) HadamardRotation::Make(m.cols, 7).ForwardRows(m.data.data(), m.rows);
  struct Case {
    int bits, dim;  // dim 1 = the scalar codebook method
  };
  for (const Case c : {Case{2, 1}, Case{2, 2}, Case{2, 4}, Case{3, 1}, Case{3, 2}}) {
    QuantSpec spec;
    spec.format = *FormatForBits(c.bits);
    spec.group_size = 64;
    if (c.dim > 1) {
      spec.method = QuantMethod::kVector;
      spec.vector_codebook = &GaussianVectorCodebook(c.dim, c.bits);
    }
    double se = 0, norm = 0;
    for (const Matrix& m : linears) {
      const QuantError e = QuantizationError(m.data.data(), m.rows, m.cols, spec, m.name);
      se += e.sq_error;
      norm += e.sq_norm;
    }
    std::printf("tq-llama-21m linears, %d-bit g%d, %d-D codebook, MSE scales: relative MSE %.5f\n",
                c.bits, spec.group_size, c.dim, se / norm);
  }
}

}  // namespace
}  // namespace tq::quant
