// Packed-weight products for the cpu backend (the fast SIMD decode kernels are issue #7):
// - With the amx level, many tokens run on AMX tiles (packed_matmul_amx.h); with avx512, the int8
//   GEMM (packed_prefill.h) where it takes the matrix; otherwise:
// - Many tokens (prefill, perplexity): a tile of weight rows is dequantized to fp32 once (in
//   parallel) and multiplied by all tokens with the float GEMM (cpu/matmul.cc), so the decode cost
//   is amortised over the tokens and a packed model runs at about float speed.
// - Few tokens (decode): each task dequantizes one row at a time into an L1-resident buffer and
//   takes its dot product with every token (loops the compiler vectorises).
#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_matmul_amx.h"
#include "kernels/cpu/packed_prefill.h"
#include "kernels/cpu/vec.h"
#include "kernels/packed_ops.h"

namespace tq::kernels::cpu {
namespace {

using quant::CodeFormat;

constexpr int64_t kFewTokens = 8;                  // below this, the row-at-a-time dot path
constexpr int64_t kTileFloats = int64_t(1) << 20;  // dequantized tile: 4 MB of fp32

// codes[0 .. 31] of one 32-code unit of a binary format (docs/FORMAT.md "Packing").
template <CodeFormat F>
inline void DecodeUnit(const uint8_t* p, uint8_t* c) {
  if constexpr (F == CodeFormat::kQ1) {
    for (int j = 0; j < 32; ++j) c[j] = (p[j >> 3] >> (j & 7)) & 1;
  } else if constexpr (F == CodeFormat::kQ2 || F == CodeFormat::kQ3) {
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 8; ++j) c[8 * k + j] = (p[j] >> (2 * k)) & 3;
    if constexpr (F == CodeFormat::kQ3) {
      for (int j = 0; j < 32; ++j) c[j] |= ((p[8 + (j >> 3)] >> (j & 7)) & 1) << 2;
    }
  } else if constexpr (F == CodeFormat::kQ4) {
    for (int j = 0; j < 16; ++j) {
      c[j] = p[j] & 15;
      c[j + 16] = p[j] >> 4;
    }
  } else {
    static_assert(F == CodeFormat::kQ8);
    std::memcpy(c, p, 32);
  }
}

template <CodeFormat F>
void DecodeRowBinary(const uint8_t* row, int64_t n, uint8_t* codes) {
  constexpr int kBytes = quant::Traits(F).bytes_per_unit;
  const int64_t full = n / 32;
  for (int64_t u = 0; u < full; ++u) DecodeUnit<F>(row + u * kBytes, codes + u * 32);
  if (n % 32) {
    uint8_t tail[32];
    DecodeUnit<F>(row + full * kBytes, tail);
    std::memcpy(codes + full * 32, tail, size_t(n % 32));
  }
}

// Ternary: chunks of up to 160 trits; a chunk of m trits has B = ceil(m / 5) bytes and byte j
// holds trits j, j+B, ..., j+4B as a base-3 fraction (digit k = ((uint8)(q·3^k)·3) >> 8).
void DecodeRowTernary(const uint8_t* row, int64_t n, uint8_t* codes) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  for (int64_t c0 = 0; c0 < n; c0 += 160) {
    const int64_t m = std::min<int64_t>(160, n - c0);
    const int64_t b = (m + 4) / 5;
    const uint8_t* p = row + c0 / 5;
    for (int k = 0; k < 5; ++k) {
      const int64_t lim = std::min(b, m - k * b);
      for (int64_t j = 0; j < lim; ++j)
        codes[c0 + k * b + j] = uint8_t((uint8_t(p[j] * kPow3[k]) * 3u) >> 8);
    }
  }
}

void DecodeRow(CodeFormat f, const uint8_t* row, int64_t n, uint8_t* codes) {
  switch (f) {
    case CodeFormat::kQ1:
      return DecodeRowBinary<CodeFormat::kQ1>(row, n, codes);
    case CodeFormat::kQ2:
      return DecodeRowBinary<CodeFormat::kQ2>(row, n, codes);
    case CodeFormat::kQ3:
      return DecodeRowBinary<CodeFormat::kQ3>(row, n, codes);
    case CodeFormat::kQ4:
      return DecodeRowBinary<CodeFormat::kQ4>(row, n, codes);
    case CodeFormat::kQ8:
      return DecodeRowBinary<CodeFormat::kQ8>(row, n, codes);
    case CodeFormat::kTernary:
      return DecodeRowTernary(row, n, codes);
  }
}

// out[cols] = row r of Ŵ; codes: scratch of cols bytes.
TQ_CPU_CLONES void DequantRow(const PackedMatrix& w, int64_t r, uint8_t* codes, float* out) {
  DecodeRow(w.format, w.codes + r * w.row_bytes, w.cols, codes);
  const int64_t g = w.group_size, groups = w.cols / g;
  if (w.method == quant::QuantMethod::kAffine) {
    const uint16_t* sc = w.scales + r * groups;
    const uint16_t* mn = w.mins + r * groups;
    for (int64_t j = 0; j < groups; ++j) {
      const float s = F16ToF32(sc[j]), m = F16ToF32(mn[j]);
      for (int64_t c = j * g; c < (j + 1) * g; ++c) out[c] = m + s * float(codes[c]);
    }
  } else {
    const float* cb = w.codebook;
    for (int64_t j = 0; j < groups; ++j) {
      const float s = w.Scale(r, j);
      for (int64_t c = j * g; c < (j + 1) * g; ++c) out[c] = s * cb[codes[c]];
    }
  }
}

TQ_CPU_CLONES float Dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  float s = 0.0f;
  for (int l = 0; l < 16; ++l) s += acc[l];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

struct RowScratch {
  AlignedBuffer<uint8_t> codes;
  AlignedBuffer<float> row;
  void Need(int64_t cols) {
    if (codes.size() < size_t(cols)) codes.resize(size_t(cols));
    if (row.size() < size_t(cols)) row.resize(size_t(cols));
  }
};

RowScratch& Scratch(int64_t cols) {
  thread_local RowScratch s;
  s.Need(cols);
  return s;
}

}  // namespace

void PackedDequantizeRows(const PackedMatrix& w, int64_t r0, int64_t count, float* out) {
  const int64_t grain = std::max<int64_t>(1, 16384 / w.cols);
  auto body = [&](int64_t b, int64_t e) {
    RowScratch& s = Scratch(w.cols);
    for (int64_t i = b; i < e; ++i) DequantRow(w, r0 + i, s.codes.data(), out + i * w.cols);
  };
  if (count * w.cols < 65536) {
    body(0, count);
  } else {
    ThreadPool::Global().ParallelFor(count, grain, body);
  }
}

void PackedMatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias, float* y) {
  CheckPackedMatrix(w, "packed matmul cpu");
  const int64_t rows = w.rows, cols = w.cols;
  if (n >= kAmxMinTokens && AmxPackedSupports(w)) return AmxPackedMatMul(x, n, w, bias, y);
  if (n >= PrefillInt8MinTokens(w) && PrefillInt8Supports(w))
    return PrefillInt8MatMul(x, n, w, bias, y);
  if (n <= kFastDecodeMaxTokens && FastDecodeSupports(w)) return FastPackedDecode(x, n, w, bias, y);
  if (n < kFewTokens) {
    auto body = [&](int64_t b, int64_t e) {
      RowScratch& s = Scratch(cols);
      for (int64_t r = b; r < e; ++r) {
        DequantRow(w, r, s.codes.data(), s.row.data());
        const float bb = bias ? bias[r] : 0.0f;
        for (int64_t t = 0; t < n; ++t)
          y[t * rows + r] = Dot(x + t * cols, s.row.data(), cols) + bb;
      }
    };
    if (rows * cols < 65536) {
      body(0, rows);
    } else {
      ThreadPool::Global().ParallelFor(rows, 16, body);
    }
    return;
  }
  // Tiles of weight rows: dequantize once, multiply by all n tokens with the float GEMM.
  const int64_t tile = std::clamp<int64_t>(kTileFloats / cols, 16, rows);
  thread_local AlignedBuffer<float> wtile, ytile;
  if (wtile.size() < size_t(tile * cols)) wtile.resize(size_t(tile * cols));
  if (ytile.size() < size_t(tile * n)) ytile.resize(size_t(tile * n));
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int64_t count = std::min(tile, rows - r0);
    cpu::PackedDequantizeRows(w, r0, count, wtile.data());
    const TensorView tv{wtile.data(), DType::F32, {count, cols}};
    cpu::MatMul(x, n, tv, bias ? bias + r0 : nullptr, ytile.data());  // [n, count]
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(y + t * rows + r0, ytile.data() + t * count, size_t(count) * sizeof(float));
  }
}

}  // namespace tq::kernels::cpu
