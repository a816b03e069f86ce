// Prefill attention: a block of queries times the heads of one kv head gives R rows (R >= 16),
// and every step is vectorised over rows instead of over head_dim:
//   Qᵀ [d, R] (scaled) is built once per task;
//   per key block: Sᵀ[t, r] = Σ_j K[t, j] · Qᵀ[j, r]   (broadcast K, 16 rows per vector: no
//   horizontal sums), causal/window mask, online softmax per row with 16 rows per vector, then
//   acc[r, :] += Σ_t P[t, r] · V[t, :] with the accumulator in registers.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_blocks.h"

namespace tq::kernels::cpu {
namespace {

// Sᵀ[KT keys][RVC*16 rows] = K[KT keys, d] · Qᵀ[d, rows]; qt and st have row stride rp.
template <int KT, int RVC>
TQ_INLINE void ScoreTile(const float* k, int64_t d, const float* qt, int64_t rp, float* st) {
  V16 a[KT][RVC] = {};
  for (int64_t j = 0; j < d; ++j) {
    V16 qv[RVC];
#pragma GCC unroll 4
    for (int c = 0; c < RVC; ++c) qv[c] = Load16(qt + j * rp + c * 16);
#pragma GCC unroll 4
    for (int t = 0; t < KT; ++t) {
      const float kv = k[t * d + j];
#pragma GCC unroll 4
      for (int c = 0; c < RVC; ++c) a[t][c] += kv * qv[c];
    }
  }
  for (int t = 0; t < KT; ++t)
    for (int c = 0; c < RVC; ++c) Store16(st + t * rp + c * 16, a[t][c]);
}

template <int KT>
TQ_INLINE void ScoreTileRows(int rvc, const float* k, int64_t d, const float* qt, int64_t rp,
                             float* st) {
  switch (rvc) {
    case 4:
      return ScoreTile<KT, 4>(k, d, qt, rp, st);
    case 3:
      return ScoreTile<KT, 3>(k, d, qt, rp, st);
    case 2:
      return ScoreTile<KT, 2>(k, d, qt, rp, st);
    default:
      return ScoreTile<KT, 1>(k, d, qt, rp, st);
  }
}

// Sᵀ [nt, rp] for nt keys of the block.
TQ_INLINE void Scores(const float* k, int64_t nt, int64_t d, const float* qt, int64_t rp,
                      float* st) {
  for (int64_t c0 = 0; c0 < rp / 16; c0 += 4) {
    const int rvc = int(std::min<int64_t>(4, rp / 16 - c0));
    int64_t t = 0;
    for (; t + 4 <= nt; t += 4)
      ScoreTileRows<4>(rvc, k + t * d, d, qt + c0 * 16, rp, st + t * rp + c0 * 16);
    for (; t < nt; ++t)
      ScoreTileRows<1>(rvc, k + t * d, d, qt + c0 * 16, rp, st + t * rp + c0 * 16);
  }
}

}  // namespace

size_t WideScratchFloats(int64_t rows, int64_t d) {
  const int64_t rp = (rows + 15) / 16 * 16;
  // kbuf, vbuf, qt, st, acc, m, l, corr, row positions
  return size_t(2 * kKeyBlock * d + d * rp + kKeyBlock * rp + rp * d + 4 * rp);
}

TQ_CPU_CLONES void AttendWide(const float* q, int64_t i0, int64_t i1, int64_t pos0, int64_t kvh,
                              const KvView& kv, const AttentionParams& p, const KeySlice& keys,
                              float* out, float* scratch) {
  const int64_t d = p.head_dim, group = p.num_heads / p.num_kv_heads;
  const int64_t rows = (i1 - i0) * group, rp = (rows + 15) / 16 * 16;
  float* kbuf = scratch;
  float* vbuf = kbuf + kKeyBlock * d;
  float* qt = vbuf + kKeyBlock * d;  // [d, rp] scaled queries, transposed
  float* st = qt + d * rp;           // [kKeyBlock, rp] scores, then probabilities
  float* acc = st + kKeyBlock * rp;  // [rp, d]
  float* m = acc + rp * d;           // [rp] running max
  float* l = m + rp;                 // [rp] running sum
  float* corr = l + rp;              // [rp] rescale of this block
  float* rpos = corr + rp;           // [rp] position of each row's query (as float)

  // Row r is query i0 + r / group of head kvh * group + r % group; padding rows repeat the last.
  for (int64_t r = 0; r < rp; ++r) {
    const int64_t rr = std::min(r, rows - 1);
    const int64_t i = i0 + rr / group, h = kvh * group + rr % group;
    const float* qh = q + (i * p.num_heads + h) * d;
    for (int64_t j = 0; j < d; ++j) qt[j * rp + r] = qh[j] * p.scale;
    rpos[r] = float(pos0 + i);
  }
  std::fill(acc, acc + rp * d, 0.0f);
  std::fill(m, m + rp, -INFINITY);
  std::fill(l, l + rp, 0.0f);

  const int64_t first =
      std::max(keys.lo, p.window > 0 ? std::max<int64_t>(0, pos0 + i0 - p.window + 1) : int64_t(0));
  const int64_t hi = std::min(keys.hi, pos0 + i1);  // keys [first, hi)
  const int64_t base = kvh * kv.head_stride;
  const V16 neg_inf = Broadcast(-INFINITY), zero = {};
  for (int64_t kb0 = first; kb0 < hi; kb0 += kKeyBlock) {
    const int64_t kb1 = std::min(hi, kb0 + kKeyBlock), nt = kb1 - kb0;
    const float* kblk = BlockF32(kv.k, kv.dtype, base + kb0 * d, nt * d, kbuf);
    const float* vblk = BlockF32(kv.v, kv.dtype, base + kb0 * d, nt * d, vbuf);
    Scores(kblk, nt, d, qt, rp, st);
    // Every row sees every key of the block unless the block reaches past the first query or
    // (window) starts before the last query's window.
    const bool full = kb1 - 1 <= pos0 + i0 && (p.window <= 0 || kb0 > pos0 + i1 - 1 - p.window);
    for (int64_t c = 0; c < rp; c += 16) {
      const V16 pos = Load16(rpos + c);
      V16 mx = neg_inf;
      for (int64_t t = 0; t < nt; ++t) {
        V16 s = Load16(st + t * rp + c);
        if (!full) {
          const float key = float(kb0 + t);
          auto visible = key <= pos;
          if (p.window > 0) visible = visible & (key > pos - float(p.window));
          s = visible ? s : neg_inf;
          Store16(st + t * rp + c, s);
        }
        mx = mx > s ? mx : s;
      }
      const V16 m_old = Load16(m + c);
      const V16 m_new = m_old > mx ? m_old : mx;
      // Rows that have seen no key yet keep m = -inf; shift by 0 there so nothing is NaN.
      const V16 shift = m_new == neg_inf ? zero : m_new;
      const V16 scale = m_old == neg_inf ? zero : Exp16(m_old - shift);
      V16 sum = Load16(l + c) * scale;
      for (int64_t t = 0; t < nt; ++t) {
        const V16 s = Load16(st + t * rp + c);
        const V16 e = s == neg_inf ? zero : Exp16(s - shift);
        Store16(st + t * rp + c, e);
        sum += e;
      }
      Store16(l + c, sum);
      Store16(m + c, m_new);
      Store16(corr + c, scale);
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* ar = acc + r * d;
      if (corr[r] != 1.0f)
        for (int64_t j = 0; j < d; ++j) ar[j] *= corr[r];
      if (d == 64) {
        WeightedSum<4>(st + r, vblk, nt, ar, rp);
      } else if (d == 128) {
        WeightedSum<8>(st + r, vblk, nt, ar, rp);
      } else if (d % 64 == 0) {  // wider heads (MLA's latent, 576) by column strips
        int64_t j = 0;
        for (; j + 128 <= d; j += 128) WeightedSum<8>(st + r, vblk + j, nt, ar + j, rp, d);
        if (j < d) WeightedSum<4>(st + r, vblk + j, nt, ar + j, rp, d);
      } else {
        for (int64_t t = 0; t < nt; ++t) Axpy(st[t * rp + r], vblk + t * d, ar, d);
      }
    }
  }
  if (keys.part) {
    for (int64_t r = 0; r < rows; ++r) {
      float* pr = keys.part + r * (2 + d);
      pr[0] = m[r], pr[1] = l[r];
      std::memcpy(pr + 2, acc + r * d, size_t(d) * sizeof(float));
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r / group, h = kvh * group + r % group;
    const float inv = 1.0f / l[r];
    float* oh = out + (i * p.num_heads + h) * d;
    for (int64_t j = 0; j < d; ++j) oh[j] = acc[r * d + j] * inv;
  }
}

}  // namespace tq::kernels::cpu
