#include "kernels/kv_ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/packing.h"

namespace tq::kernels {

void DecodeKvVector(const KvCodeFormat& f, const uint8_t* codes, const uint16_t* scales,
                    float* out) {
  uint8_t idx[512];
  for (int s = 0; s < f.num_segments; ++s) {
    const KvCodeSegment& seg = f.segments[s];
    for (int64_t c0 = seg.begin; c0 < seg.end; c0 += 512) {
      // Segments longer than 512 channels are unpacked in whole 32-code units.
      const int64_t len = std::min<int64_t>(512, seg.end - c0);
      const int64_t unit_bytes = quant::Traits(seg.format).bytes_per_unit;
      const uint8_t* src = codes + seg.byte_offset + (c0 - seg.begin) / 32 * unit_bytes;
      quant::UnpackCodes(seg.format, src, len, idx);
      for (int64_t i = 0; i < len; ++i)
        out[c0 + i] = F16ToF32(scales[(c0 + i) / f.group]) * seg.levels[idx[i]];
    }
  }
}

double QjlFactor(int64_t m) { return std::sqrt(std::numbers::pi / 2) / double(m); }

void QjlProject(const float* s, int64_t m, int64_t dim, const float* x, float* out) {
  for (int64_t j = 0; j < m; ++j) {
    const float* row = s + j * dim;
    float acc = 0;
    for (int64_t i = 0; i < dim; ++i) acc += row[i] * x[i];
    out[j] = acc;
  }
}

double QjlSignDot(const float* sq, const uint8_t* bits, int64_t m) {
  double acc = 0;
  for (int64_t j = 0; j < m; ++j) acc += (bits[j >> 3] >> (j & 7) & 1) ? sq[j] : -double(sq[j]);
  return acc;
}

void CheckCompressedKvView(const CompressedKvView& kv, const AttentionParams& p, int64_t end,
                           const char* where) {
  TQ_CHECK(kv.k_rotation && kv.v_rotation && kv.k_rotation->dim() == p.head_dim &&
               kv.v_rotation->dim() == p.head_dim,
           where, "rotations missing or not of head_dim {}", p.head_dim);
  for (const KvCodeFormat* f : {&kv.k_format, &kv.v_format}) {
    TQ_CHECK(f->dim == p.head_dim && f->group > 0 && f->dim % f->group == 0 &&
                 f->num_segments >= 1 && f->num_segments <= 2,
             where, "bad code format: dim {} (head_dim {}), group {}, {} segments", f->dim,
             p.head_dim, f->group, f->num_segments);
    int64_t c = 0;
    for (int s = 0; s < f->num_segments; ++s) {
      const KvCodeSegment& seg = f->segments[s];
      TQ_CHECK(seg.begin == c && seg.end > seg.begin && seg.levels != nullptr &&
                   (s == 0 || seg.begin % 32 == 0),
               where, "code segment {} covers [{}, {}) after channel {}", s, seg.begin, seg.end, c);
      c = seg.end;
    }
    TQ_CHECK(c == f->dim, where, "code segments cover {} of {} channels", c, f->dim);
  }
  TQ_CHECK(!kv.qjl_matrix || (kv.qjl_m > 0 && kv.qjl_m <= 1024), where, "QJL sketch of {} bits",
           kv.qjl_m);
  TQ_CHECK(kv.num_spans >= 1 && kv.num_spans <= CompressedKvView::kMaxSpans, where, "{} spans",
           kv.num_spans);
  int64_t pos = 0;
  for (int i = 0; i < kv.num_spans; ++i) {
    const KvSpan& s = kv.spans[i];
    TQ_CHECK(s.begin == pos && s.end >= s.begin, where, "span {} is [{}, {}) after position {}", i,
             s.begin, s.end, pos);
    const bool ok =
        s.coded ? (s.k_codes && s.v_codes && s.k_scales && s.v_scales) : (s.k16 && s.v16);
    TQ_CHECK(ok || s.end == s.begin, where, "span {} has no storage", i);
    TQ_CHECK(!kv.qjl_matrix || !s.coded || s.end == s.begin || (s.k_qjl && s.k_qjl_norm), where,
             "span {} has no QJL sketches but the view has a QJL matrix", i);
    TQ_CHECK(s.end == s.begin || s.head_stride >= s.end - s.begin, where,
             "span {} head stride {} < its {} positions", i, s.head_stride, s.end - s.begin);
    pos = s.end;
  }
  TQ_CHECK(pos >= end, where, "spans cover {} positions, attention needs {}", pos, end);
  for (const int32_t* order : {kv.k_order, kv.v_order}) {
    if (!order) continue;
    TQ_CHECK(p.head_dim <= 1024, where, "channel order of head_dim {} > 1024", p.head_dim);
    for (int64_t h = 0; h < p.num_kv_heads; ++h) {
      uint64_t seen[16] = {};  // head_dim <= 1024
      for (int64_t j = 0; j < p.head_dim; ++j) {
        const int32_t c = order[h * p.head_dim + j];
        TQ_CHECK(c >= 0 && c < p.head_dim && !(seen[c >> 6] >> (c & 63) & 1), where,
                 "channel order of kv head {} is not a permutation (entry {} = {})", h, j, c);
        seen[c >> 6] |= uint64_t(1) << (c & 63);
      }
    }
  }
}

void CompressedAttention(const float* q, int64_t n, int64_t pos0, const CompressedKvView& kv,
                         const AttentionParams& p, float* out) {
  TQ_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0 && p.head_dim > 0,
           "compressed attention", "bad head counts {} / {} (head_dim {})", p.num_heads,
           p.num_kv_heads, p.head_dim);
  if (n <= 0) return;
  CheckCompressedKvView(kv, p, pos0 + n, "compressed attention");
  if (!kv.k_order && !kv.v_order) {
    CpuCompressedAttention(q, n, pos0, kv, p, out);
  } else {
    // Outlier split on the cpu backend: the kernel knows no channel orders, so the queries are
    // gathered into the key order here and the outputs scattered back (exact: a permutation).
    const int64_t d = p.head_dim, group = p.num_heads / p.num_kv_heads, size = n * p.num_heads * d;
    thread_local std::vector<float> qp, op;
    if (qp.size() < size_t(size)) qp.resize(size_t(size)), op.resize(size_t(size));
    for (int64_t r = 0; r < n * p.num_heads; ++r) {
      const int64_t kvh = (r % p.num_heads) / group;
      for (int64_t j = 0; j < d; ++j)
        qp[size_t(r * d + j)] = kv.k_order ? q[r * d + kv.k_order[kvh * d + j]] : q[r * d + j];
    }
    CompressedKvView plain = kv;
    plain.k_order = plain.v_order = nullptr;
    CpuCompressedAttention(qp.data(), n, pos0, plain, p, op.data());
    for (int64_t r = 0; r < n * p.num_heads; ++r) {
      const int64_t kvh = (r % p.num_heads) / group;
      for (int64_t j = 0; j < d; ++j)
        out[r * d + (kv.v_order ? kv.v_order[kvh * d + j] : j)] = op[size_t(r * d + j)];
    }
  }
}

}  // namespace tq::kernels
