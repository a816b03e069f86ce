// Causal (optionally sliding-window) GQA attention over an F32/F16/BF16 KV cache, flash style:
// keys and values are visited in blocks of kKeyBlock positions, converted to fp32 once per block
// and shared by every query row of the task (kQueryBlock queries x the heads of one kv head),
// with an online softmax (running max m, running sum l, rescaled accumulator).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_blocks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec.h"

namespace tq::kernels::cpu {
namespace {

// Queries [i0, i1) of the heads that read kv head `kvh`. scratch: see ScratchFloats().
TQ_CPU_CLONES void AttendTask(const float* q, int64_t i0, int64_t i1, int64_t pos0, int64_t kvh,
                              const KvView& kv, const AttentionParams& p, float* out,
                              float* scratch) {
  const int64_t d = p.head_dim, group = p.num_heads / p.num_kv_heads;
  const int64_t rows = (i1 - i0) * group;
  float* kbuf = scratch;
  float* vbuf = kbuf + kKeyBlock * d;
  float* acc = vbuf + kKeyBlock * d;  // [rows, d]
  float* m = acc + rows * d;          // [rows] running max
  float* l = m + rows;                // [rows] running sum
  float* s = l + rows;                // [kKeyBlock] scores
  std::fill(acc, acc + rows * d, 0.0f);
  std::fill(m, m + rows, -INFINITY);
  std::fill(l, l + rows, 0.0f);

  auto first_key = [&](int64_t pos) {
    return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : int64_t(0);
  };
  const int64_t lo = first_key(pos0 + i0), hi = pos0 + i1;  // keys [lo, hi)
  const int64_t base = kvh * kv.head_stride;
  for (int64_t kb0 = lo; kb0 < hi; kb0 += kKeyBlock) {
    const int64_t kb1 = std::min(hi, kb0 + kKeyBlock);
    const float* kblk = BlockF32(kv.k, kv.dtype, base + kb0 * d, (kb1 - kb0) * d, kbuf);
    const float* vblk = BlockF32(kv.v, kv.dtype, base + kb0 * d, (kb1 - kb0) * d, vbuf);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t pos = pos0 + i;
      const int64_t t0 = std::max(kb0, first_key(pos)), t1 = std::min(kb1, pos + 1);
      if (t0 >= t1) continue;
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kvh * group + g, r = (i - i0) * group + g;
        const float* qh = q + (i * p.num_heads + h) * d;
        // Scores of this block's keys, then an online-softmax update.
        const int64_t nt = t1 - t0;
        float mx = -INFINITY;
        for (int64_t t = 0; t < nt; ++t) {
          s[t] = Dot(qh, kblk + (t0 + t - kb0) * d, d) * p.scale;
          mx = std::max(mx, s[t]);
        }
        float* ar = acc + r * d;
        if (mx > m[r]) {
          const float corr = std::exp(m[r] - mx);  // 0 on the first block (m = -inf)
          l[r] *= corr;
          for (int64_t j = 0; j < d; ++j) ar[j] *= corr;
          m[r] = mx;
        }
        const V16 mv = Broadcast(m[r]);
        V16 sum = {};
        int64_t t = 0;
        for (; t + 16 <= nt; t += 16) {
          const V16 e = Exp16(Load16(s + t) - mv);
          Store16(s + t, e);
          sum += e;
        }
        float tail = 0;
        for (; t < nt; ++t) tail += (s[t] = std::exp(s[t] - m[r]));
        l[r] += HorizontalSum(sum) + tail;
        const float* vt = vblk + (t0 - kb0) * d;
        if (d == 64) {
          WeightedSum<4>(s, vt, nt, ar);
        } else if (d == 128) {
          WeightedSum<8>(s, vt, nt, ar);
        } else {
          for (t = 0; t < nt; ++t) Axpy(s[t], vt + t * d, ar, d);
        }
      }
    }
  }
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t h = kvh * group + g, r = (i - i0) * group + g;
      const float inv = 1.0f / l[r];
      float* oh = out + (i * p.num_heads + h) * d;
      for (int64_t j = 0; j < d; ++j) oh[j] = acc[r * d + j] * inv;
    }
  }
}

// out rows of one (query block, kv head) from its `slices` key slices' states part [slices,
// rows, 2 + d] (KeySlice): out = Σ_s acc_s e^(m_s - M) / Σ_s l_s e^(m_s - M), M = max_s m_s.
void MergeSlices(const float* part, int64_t slices, int64_t rows, int64_t d, int64_t i0,
                 int64_t kvh, const AttentionParams& p, float* out) {
  const int64_t group = p.num_heads / p.num_kv_heads, stride = rows * (2 + d);
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -INFINITY;
    for (int64_t s = 0; s < slices; ++s) mx = std::max(mx, part[s * stride + r * (2 + d)]);
    float* oh = out + ((i0 + r / group) * p.num_heads + kvh * group + r % group) * d;
    std::fill(oh, oh + d, 0.0f);
    float sum = 0.0f;
    for (int64_t s = 0; s < slices; ++s) {
      const float* ps = part + s * stride + r * (2 + d);
      if (ps[0] == -INFINITY) continue;  // no key of this slice is visible to the row
      const float w = std::exp(ps[0] - mx);
      sum += ps[1] * w;
      for (int64_t j = 0; j < d; ++j) oh[j] += w * ps[2 + j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < d; ++j) oh[j] *= inv;
  }
}

// Decode with fewer (query block, kv head) tasks than threads — MLA's one latent head: H query
// heads, n <= kQueryBlock — over at least this many keys a thread splits the keys instead.
constexpr int64_t kMinSliceKeys = 4 * kKeyBlock;

}  // namespace

void Attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out) {
  const int64_t qblocks = (n + kQueryBlock - 1) / kQueryBlock;
  const int64_t group = p.num_heads / p.num_kv_heads, d = p.head_dim;
  // Blocks of at least 16 rows (queries x heads) take the wide path: rows in vector lanes.
  const bool wide = std::min(n, kQueryBlock) * group >= 16;
  const size_t scratch_floats =
      wide ? WideScratchFloats(kQueryBlock * group, d)
           : size_t(2 * kKeyBlock * d + kQueryBlock * group * (d + 2) + kKeyBlock);
  auto task = [&](int64_t t, int) {
    thread_local AlignedBuffer<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    const int64_t kvh = t % p.num_kv_heads, qb = t / p.num_kv_heads;
    const int64_t i0 = qb * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock);
    if (wide && (i1 - i0) * group >= 16) {
      AttendWide(q, i0, i1, pos0, kvh, kv, p, {}, out, scratch.data());
    } else {
      AttendTask(q, i0, i1, pos0, kvh, kv, p, out, scratch.data());
    }
  };
  const int64_t tasks = p.num_kv_heads * qblocks;
  ThreadPool& pool = ThreadPool::Global();
  const int64_t keys = pos0 + n;
  if (wide && n <= kQueryBlock && tasks < pool.size() && keys >= 2 * kMinSliceKeys) {
    // One query block: each kv head's keys in `slices` slices, merged per row afterwards.
    const int64_t rows = n * group;
    const int64_t slices = std::min((pool.size() + tasks - 1) / tasks, keys / kMinSliceKeys);
    const int64_t per = (keys + slices - 1) / slices;
    thread_local AlignedBuffer<float> part;
    const size_t part_floats = size_t(tasks * slices * rows * (2 + d));
    if (part.size() < part_floats) part.resize(part_floats);
    float* parts = part.data();  // (a thread_local named in the tasks would be each worker's own)
    pool.Run(tasks * slices, [&](int64_t t, int) {
      thread_local AlignedBuffer<float> scratch;
      if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
      const int64_t kvh = t / slices, s = t % slices;
      const KeySlice slice{s * per, std::min(keys, (s + 1) * per), parts + t * rows * (2 + d)};
      AttendWide(q, 0, n, pos0, kvh, kv, p, slice, out, scratch.data());
    });
    for (int64_t kvh = 0; kvh < p.num_kv_heads; ++kvh)
      MergeSlices(parts + kvh * slices * rows * (2 + d), slices, rows, d, 0, kvh, p, out);
    return;
  }
  // Short contexts run on the calling thread: waking the pool would cost more than the work.
  if (n * (pos0 + n) * p.num_heads * d < (int64_t(1) << 16)) {
    for (int64_t t = 0; t < tasks; ++t) task(t, 0);
  } else {
    pool.Run(tasks, task);
  }
}

}  // namespace tq::kernels::cpu
