// The CUDA backend's host-side translations of kernels/ views into the PODs of launch.h, with
// the argument checks that go with them (cuda_backend.cc; host code only, never seen by nvcc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cuda/launch.h"
#include "quant/format.h"

namespace tq::kernels::cuda {

// A plain cache's view for queries at pos0 .. pos0 + n - 1: false when there is nothing to do.
inline bool CheckPlainKv(const KvView& kv, int64_t pos0, int64_t n, int64_t kv_heads,
                         int64_t head_dim, const std::string& where) {
  TQ_CHECK(pos0 >= 0, where, "negative start position {}", pos0);
  if (n <= 0) return false;
  TQ_CHECK(kv.k && kv.v && (kv_heads == 1 || kv.head_stride >= (pos0 + n) * head_dim), where,
           "cache of head stride {} cannot hold {} positions of head_dim {}", kv.head_stride,
           pos0 + n, head_dim);
  return true;
}

inline void CheckHeads(const AttentionParams& p, const std::string& where) {
  TQ_CHECK(p.num_kv_heads > 0 && p.num_heads > 0 && p.num_heads % p.num_kv_heads == 0 &&
               p.head_dim > 0 && p.head_dim <= kMaxHeadDim,
           where, "bad head counts {} / {} or head_dim {} (at most {})", p.num_heads,
           p.num_kv_heads, p.head_dim, kMaxHeadDim);
}

inline DevAttention Dev(const AttentionParams& p) {
  return {p.num_heads, p.num_kv_heads, p.head_dim, p.window, p.scale};
}

inline DevPacked ToDev(const PackedMatrix& w, const std::string& where) {
  CheckPackedMatrix(w, where.c_str());
  DevPacked d;
  d.affine = w.method == quant::QuantMethod::kAffine ? 1 : 0;
  d.format = int(w.format);
  d.rows = w.rows;
  d.cols = w.cols;
  d.group_size = w.group_size;
  d.row_bytes = w.row_bytes;
  d.codes = w.codes;
  d.scales = w.scales;
  d.scale_codes = w.scale_codes;
  d.scale_table = w.scale_table;
  d.mins = w.mins;
  d.codebook = w.codebook;
  d.levels = quant::Traits(w.format).levels;
  d.linear_q8_step = w.linear_q8_step;
  return d;
}

// The device views of a group's outputs (launch.h FastPackedMatVecGroup / MmaPackedMatVec take
// at most 4).
inline constexpr size_t kMaxGroupViews = 4;
struct GroupViews {
  DevPacked ws[kMaxGroupViews];
  const float* biases[kMaxGroupViews];
  float* ys[kMaxGroupViews];
};
inline void ToDev(std::span<const PackedMatMulOutput> outs, GroupViews& v,
                  const std::string& where) {
  for (size_t i = 0; i < outs.size(); ++i) {
    TQ_CHECK(outs[i].w && outs[i].y, where, "output {} has no weight or no destination", i);
    v.ws[i] = ToDev(*outs[i].w, where);
    v.biases[i] = outs[i].bias;
    v.ys[i] = outs[i].y;
  }
}

inline DevCodeFormat ToDev(const KvCodeFormat& f) {
  DevCodeFormat d;
  d.dim = f.dim;
  d.group = f.group;
  d.code_bytes = f.code_bytes;
  d.num_segments = f.num_segments;
  for (int s = 0; s < f.num_segments; ++s) {
    const KvCodeSegment& g = f.segments[s];
    d.seg[s] = {g.begin,  g.end,       g.byte_offset, int(g.format), quant::Traits(g.format).levels,
                g.levels, g.thresholds};
  }
  return d;
}

}  // namespace tq::kernels::cuda
