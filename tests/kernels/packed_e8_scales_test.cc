// e8 group scales (PackedMatrix::scale_codes + scale_table) through the public cpu entry point
// at every ISA level this machine has: which path runs (int8 decode, AMX, generic) for each
// format × group size × token count, its output against the scalar oracle, and tables with
// extreme entries (0, subnormal, huge) or NaN in entries no group uses.
// The per-kernel bounds over many shapes are in fast_packed_decode_test.cc and amx_gemm_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_matmul_amx.h"
#include "kernels/packed_ops.h"
#include "packed_test_util.h"

namespace tq::kernels {
namespace {

using cpu::Isa;
using quant::CodeFormat;
using quant::QuantMethod;
using test::IsaScope;
using test::Owned;
using test::RandomPacked;
using test::Scales;

std::vector<Isa> Levels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    if (i <= cpu::DetectedIsa()) v.push_back(i);
  return v;
}

const CodeFormat kFormats[] = {CodeFormat::kQ2, CodeFormat::kQ3, CodeFormat::kQ4, CodeFormat::kQ8,
                               CodeFormat::kTernary};

// Per output |got - want| <= 0.02 · Σ_c |ŵ_rc · x_c| + tiny (the int8 bound; AMX and the float
// path are tighter); returns the worst ratio error / bound.
double CheckAgainstRef(const Owned& o, const std::vector<float>& x, int64_t n,
                       const std::string& what) {
  const PackedMatrix& w = o.view;
  std::vector<float> want(size_t(n * w.rows)), got(want.size()), wd(size_t(w.rows * w.cols));
  ref::PackedDequantizeRows(w, 0, w.rows, wd.data());
  ref::PackedMatMul(x.data(), n, w, nullptr, want.data());
  PackedMatMul(x.data(), n, w, nullptr, got.data());
  double worst = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double mag = 0;
      for (int64_t c = 0; c < w.cols; ++c)
        mag += std::fabs(double(wd[size_t(r * w.cols + c)]) * x[size_t(t * w.cols + c)]);
      const size_t i = size_t(t * w.rows + r);
      EXPECT_TRUE(std::isfinite(got[i])) << what << " token " << t << " row " << r;
      const double bound = 0.02 * mag + 1e-30;
      EXPECT_NEAR(got[i], want[i], bound) << what << " token " << t << " row " << r;
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / bound);
    }
  }
  return worst;
}

std::string Name(Isa isa, CodeFormat f, int64_t g, int64_t n) {
  return std::string(cpu::IsaName(isa)) + " " + std::string(quant::Traits(f).name) + " g" +
         std::to_string(g) + " n=" + std::to_string(n);
}

// e8 matrices take the same fast paths as fp16 ones (no silent fallback to the generic path),
// and every path matches the oracle, for decode (1..16 tokens) and prefill (33, 257 tokens).
TEST(PackedE8Scales, EveryPathMatchesRefAndE8TakesTheFp16Paths) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd;
  for (Isa isa : Levels()) {
    IsaScope scope(isa);
    for (CodeFormat f : kFormats) {
      for (int64_t g : {16, 32, 64, 128}) {
        const Owned e8 = RandomPacked(QuantMethod::kCodebook, f, 37, 640, g, 3, Scales::kE8);
        const Owned f16 = RandomPacked(QuantMethod::kCodebook, f, 37, 640, g, 3, Scales::kF16);
        EXPECT_EQ(cpu::FastDecodeSupports(e8.view), cpu::FastDecodeSupports(f16.view))
            << Name(isa, f, g, 1);
        EXPECT_EQ(cpu::AmxPackedSupports(e8.view), cpu::AmxPackedSupports(f16.view))
            << Name(isa, f, g, 33);
        if (isa >= Isa::kAvx512) {
          EXPECT_TRUE(cpu::FastDecodeSupports(e8.view)) << Name(isa, f, g, 1);
        }
        if (isa == Isa::kAmx && f != CodeFormat::kTernary) {
          EXPECT_TRUE(cpu::AmxPackedSupports(e8.view)) << Name(isa, f, g, 33);
        }
        for (int64_t n : {1, 2, 4, 5, 9, 16, 33, 257}) {
          std::vector<float> x(size_t(n * 640));
          for (auto& v : x) v = nd(rng);
          CheckAgainstRef(e8, x, n, Name(isa, f, g, n));
        }
      }
    }
  }
}

// A table spanning 0, subnormal, tiny and huge scales, every code used: outputs stay finite and
// within the bound (relative to each output's own magnitude), on every path.
TEST(PackedE8Scales, ExtremeTableEntriesGiveNoNaN) {
  std::vector<float> table = test::E8TestTable();
  table[0] = 0.0f;
  table[1] = std::numeric_limits<float>::denorm_min();
  table[2] = 1e-30f;
  table[3] = std::numeric_limits<float>::min();  // smallest normal
  table[254] = 1e6f;
  table[255] = 6.5e4f;
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (Isa isa : Levels()) {
    IsaScope scope(isa);
    for (CodeFormat f : kFormats) {
      for (int64_t g : {16, 64}) {
        Owned o = RandomPacked(QuantMethod::kCodebook, f, 40, 1024, g, 9, Scales::kE8, &table);
        // Whole rows of extremes: row 0 all zero scales, row 1 all subnormal, row 2 all huge.
        for (int64_t j = 0; j < 1024 / g; ++j) {
          o.scale_codes[size_t(j)] = 0;
          o.scale_codes[size_t(1024 / g + j)] = 1;
          o.scale_codes[size_t(2 * 1024 / g + j)] = 254;
        }
        for (int64_t n : {1, 3, 16, 40}) {
          std::vector<float> x(size_t(n * 1024));
          for (auto& v : x) v = nd(rng);
          CheckAgainstRef(o, x, n, "extreme " + Name(isa, f, g, n));
        }
      }
    }
  }
}

// Table entries that no group uses may hold anything (NaN, inf): no path may read them.
TEST(PackedE8Scales, UnusedTableEntriesAreNeverRead) {
  std::vector<float> table = test::E8TestTable();
  for (int i = 0; i < 256; ++i)
    if (i < 74 || i > 212) table[size_t(i)] = std::numeric_limits<float>::quiet_NaN();
  table[213] = std::numeric_limits<float>::infinity();
  std::mt19937 rng(8);
  std::normal_distribution<float> nd;
  for (Isa isa : Levels()) {
    IsaScope scope(isa);
    for (CodeFormat f : kFormats) {
      for (int64_t g : {16, 32, 128}) {
        // cols 2080: 65 units (an odd last step), 13 ternary chunks; 2176 = 17 groups of 128.
        // The default codes (74 .. 212) never touch the poisoned entries.
        const int64_t cols = g == 128 ? 2176 : 2080;
        Owned o = RandomPacked(QuantMethod::kCodebook, f, 9, cols, g, 2, Scales::kE8);
        o.scale_table = table;
        o.view.scale_table = o.scale_table.data();
        for (int64_t n : {1, 7, 16, 20}) {
          std::vector<float> x(size_t(n * cols));
          for (auto& v : x) v = nd(rng);
          CheckAgainstRef(o, x, n, "poisoned " + Name(isa, f, g, n));
        }
      }
    }
  }
}

// The same codes with e8 scales and with fp16 scales holding the same values (a table of
// fp16-exact entries) give the same fast-path outputs: e8 changes only where scales come from.
TEST(PackedE8Scales, E8AndEqualFp16ScalesGiveIdenticalOutputs) {
  std::vector<float> table(256);
  for (int i = 0; i < 256; ++i) table[size_t(i)] = F16ToF32(F32ToF16(0.001f * float(i + 1)));
  std::mt19937 rng(6);
  std::normal_distribution<float> nd;
  for (Isa isa : Levels()) {
    IsaScope scope(isa);
    for (CodeFormat f : kFormats) {
      for (int64_t g : {16, 32, 64}) {
        const Owned e8 =
            RandomPacked(QuantMethod::kCodebook, f, 21, 512, g, 5, Scales::kE8, &table);
        std::vector<uint16_t> h(e8.scale_codes.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = F32ToF16(table[e8.scale_codes[i]]);
        PackedMatrix v16 = e8.view;
        v16.scale_codes = nullptr;
        v16.scale_table = nullptr;
        v16.scales = h.data();
        for (int64_t n : {1, 4, 13, 50}) {
          std::vector<float> x(size_t(n * 512)), a(size_t(n * 21)), b(a.size());
          for (auto& v : x) v = nd(rng);
          PackedMatMul(x.data(), n, e8.view, nullptr, a.data());
          PackedMatMul(x.data(), n, v16, nullptr, b.data());
          EXPECT_EQ(a, b) << Name(isa, f, g, n);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tq::kernels
