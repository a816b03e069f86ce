#include "kv/turboquant_kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace tq {
namespace {

struct GlobalStats {
  std::mutex mu;
  KvRoundtripStats stats;
};

GlobalStats& Global() {
  static GlobalStats g;
  return g;
}

double Cosine(const float* a, const float* b, int64_t d) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < d; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

// Bits of the keys' MSE codes: k_bits, less the sign bit of the QJL sketch.
double KeyCodecBits(const KvCacheOptions& o) { return o.k_bits - (o.qjl ? 1 : 0); }

void CheckOptions(const KvLayout& layout, const KvCacheOptions& o) {
  TQ_CHECK(IsValidKvBits(o.k_bits), "kv cache", "k_bits {} (expected 2, 2.5, 3, 3.5, 4 or 8)",
           o.k_bits);
  TQ_CHECK(IsValidKvBits(o.v_bits), "kv cache", "v_bits {} (expected 2, 2.5, 3, 3.5, 4 or 8)",
           o.v_bits);
  TQ_CHECK(!o.qjl || IsValidQjlKeyBits(o.k_bits), "kv cache",
           "qjl needs k_bits 2, 2.5, 3, 3.5 or 4 (the MSE codec at k_bits - 1 plus one sign bit), "
           "not {}",
           o.k_bits);
  TQ_CHECK(o.sink >= 0, "kv cache", "sink {} is negative", o.sink);
  TQ_CHECK(o.window >= 0, "kv cache", "window {} is negative", o.window);
  TQ_CHECK(o.boundary >= 0, "kv cache", "boundary {} is negative", o.boundary);
  TQ_CHECK(o.center >= 0, "kv cache", "center {} is negative", o.center);
  TQ_CHECK(layout.head_dim >= 2 && layout.head_dim <= 1024, "kv cache",
           "head_dim {} outside [2, 1024]", layout.head_dim);
  if (o.outliers != 0) {
    const std::string problem = KvOutlierCountProblem(layout.head_dim, o.outliers);
    TQ_CHECK(problem.empty(), "kv cache", "outliers: {}", problem);
    TQ_CHECK(KvOutlierSplit(layout.head_dim, KeyCodecBits(o), o.outliers) ||
                 KvOutlierSplit(layout.head_dim, o.v_bits, o.outliers),
             "kv cache",
             "outliers: {} of {} channels give no exact split of K {} or V {} bits (outliers at "
             "more bits, the rest at fewer, both in 1..4)",
             o.outliers, layout.head_dim, o.k_bits, o.v_bits);
  }
}

// The codec of one side: the outlier split when opts ask for it and `bits` has an exact one.
KvVectorCodec MakeCodec(const KvLayout& layout, const KvCacheOptions& o, double bits) {
  if (o.outliers > 0)
    if (const auto w = KvOutlierSplit(layout.head_dim, bits, o.outliers))
      return KvVectorCodec(layout.head_dim, o.outliers, *w, o.scale, o.codebook);
  return KvVectorCodec(layout.head_dim, bits, o.scale, o.codebook);
}

}  // namespace

void KvRoundtripStats::Add(bool key, double cos) {
  if (key) {
    k_cos_sum += cos, ++k_count, k_cos_min = std::min(k_cos_min, cos);
  } else {
    v_cos_sum += cos, ++v_count, v_cos_min = std::min(v_cos_min, cos);
  }
}

void KvRoundtripStats::Merge(const KvRoundtripStats& o) {
  k_count += o.k_count;
  v_count += o.v_count;
  k_cos_sum += o.k_cos_sum;
  v_cos_sum += o.v_cos_sum;
  k_cos_min = std::min(k_cos_min, o.k_cos_min);
  v_cos_min = std::min(v_cos_min, o.v_cos_min);
}

KvRoundtripStats GlobalKvRoundtripStats() {
  std::lock_guard<std::mutex> lock(Global().mu);
  return Global().stats;
}

TurboQuantKvCache::TurboQuantKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                                     kernels::Backend& backend)
    : KvCache(layout, opts.max_tokens, opts.max_append, backend),
      opts_(opts),
      kcodec_(MakeCodec((CheckOptions(layout, opts), layout), opts, KeyCodecBits(opts))),
      vcodec_(MakeCodec(layout, opts, opts.v_bits)) {
  TQ_CHECK(!opts.roundtrip_stats || backend.memory_space() == MemorySpace::kHost, "kv cache",
           "roundtrip statistics (perplexity --kv-stats) decode on the host: use --device cpu, "
           "not {}",
           backend.name());
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, L = layout_.num_layers;
  sink_cap_ = std::min(opts.sink, capacity_);
  tail_cap_ = opts.window > 0 ? opts.window + kBlock : 0;
  code_cap_ = capacity_ - sink_cap_;
  // The level and threshold tables where the backend's ops read them (on the host: views).
  auto upload_format = [&](const kernels::KvCodeFormat& host) {
    kernels::KvCodeFormat f = host;
    for (int s = 0; s < f.num_segments; ++s) {
      kernels::KvCodeSegment& g = f.segments[s];
      const size_t levels = size_t(quant::Traits(g.format).levels);
      tables_.push_back(backend.Upload(g.levels, levels * sizeof(float), "KV codebook levels"));
      g.levels = tables_.back().as<float>();
      tables_.push_back(
          backend.Upload(g.thresholds, (levels - 1) * sizeof(float), "KV codebook thresholds"));
      g.thresholds = tables_.back().as<float>();
    }
    return f;
  };
  kformat_ = upload_format(kcodec_.format());
  vformat_ = upload_format(vcodec_.format());
  KvLayout dense_layout = layout_;
  dense_layout.num_layers = 0;
  dense_layout.window.clear();
  dense_layout.recurrent_floats.clear();  // the recurrent state lives in this cache's base
  layers_.resize(size_t(L));
  for (int64_t l = 0; l < L; ++l) {
    Layer& y = layers_[size_t(l)];
    y.dense = layout_.window[size_t(l)] > 0 || l < opts.boundary || l >= L - opts.boundary;
    if (y.dense) {
      y.dense_index = dense_layout.num_layers++;
      dense_layout.window.push_back(layout_.window[size_t(l)]);
      continue;
    }
    // Independent signs for K and V of every layer, from the one stored seed.
    // Split sides: blocks of the split's scale group, so each subset has its own rotation.
    const int64_t kblock = kcodec_.outliers() > 0 ? KvOutlierGroup(D, kcodec_.outliers()) : D;
    const int64_t vblock = vcodec_.outliers() > 0 ? KvOutlierGroup(D, vcodec_.outliers()) : D;
    y.rk = quant::HadamardRotation::Make(D, opts.seed + uint64_t(2 * l), kblock);
    y.rv = quant::HadamardRotation::Make(D, opts.seed + uint64_t(2 * l + 1), vblock);
    y.rk_signs = backend.Upload(y.rk.signs().data(), size_t(D), "KV rotation signs");
    y.rv_signs = backend.Upload(y.rv.signs().data(), size_t(D), "KV rotation signs");
    const std::string what = fmt::format("the TurboQuant KV cache (layer {})", l);
    auto alloc = [&](int64_t count, size_t elem) {
      return backend.Allocate(size_t(count) * elem, what);
    };
    if (kcodec_.outliers() > 0) y.order_k = alloc(H * D, sizeof(int32_t));
    if (vcodec_.outliers() > 0) y.order_v = alloc(H * D, sizeof(int32_t));
    y.sink_k = alloc(H * sink_cap_ * D, 2);
    y.sink_v = alloc(H * sink_cap_ * D, 2);
    y.tail_k = alloc(H * tail_cap_ * D, 2);
    y.tail_v = alloc(H * tail_cap_ * D, 2);
    y.codes_k = alloc(H * code_cap_ * kcodec_.code_bytes(), 1);
    y.codes_v = alloc(H * code_cap_ * vcodec_.code_bytes(), 1);
    y.scales_k = alloc(H * code_cap_ * kcodec_.groups(), 2);
    y.scales_v = alloc(H * code_cap_ * vcodec_.groups(), 2);
    if (opts.center > 0) y.mean_v = alloc(H * D, sizeof(float));
    if (opts.qjl) {
      y.sketch =
          KvQjlSketch(D, opts.seed ^ (0x716a6c5f736b6574ull + uint64_t(l) * 0x9e3779b97f4a7c15ull));
      y.qjl_matrix =
          backend.Upload(y.sketch.matrix(), size_t(D * D) * sizeof(float), "KV QJL sketch matrix");
      y.qjl_bits = alloc(H * code_cap_ * y.sketch.sign_bytes(), 1);
      y.qjl_norm = alloc(H * code_cap_, 2);
    }
  }
  if (dense_layout.num_layers > 0) {
    KvCacheOptions d;
    d.max_tokens = capacity_;
    d.max_append = opts.max_append;  // sliding-window layers keep their window (kv_cache.h)
    d.dtype = opts.dtype;
    dense_ = MakeKvCache(dense_layout, d, backend);
  }
}

TurboQuantKvCache::~TurboQuantKvCache() {
  std::lock_guard<std::mutex> lock(Global().mu);
  Global().stats.Merge(stats_);
}

int64_t TurboQuantKvCache::CodedBytesPerHead() const {
  // sign bits of the m = head_dim sketch + the fp16 ‖r‖
  const int64_t sketch = opts_.qjl ? kernels::QjlSignBytes(layout_.head_dim) + 2 : 0;
  return kcodec_.code_bytes() + 2 * kcodec_.groups() + sketch + vcodec_.code_bytes() +
         2 * vcodec_.groups();
}

int64_t TurboQuantKvCache::BytesPerToken() const {
  const int64_t per_head = CodedBytesPerHead();
  int64_t bytes = dense_ ? dense_->BytesPerToken() : 0;
  for (const Layer& y : layers_)
    if (!y.dense) bytes += layout_.num_kv_heads * per_head;
  return bytes;
}

void TurboQuantKvCache::RollBack(Layer& y, int64_t n) const {
  if (y.stored() <= n) return;
  if (n <= y.sink_len) {
    y.sink_len = n;
    y.coded = y.tail_len = 0;
  } else if (n <= y.sink_len + y.coded) {
    y.coded = n - y.sink_len;
    y.tail_len = 0;
  } else {
    y.tail_len = n - y.sink_len - y.coded;
  }
}

kernels::KvCodeSlots TurboQuantKvCache::Slots(Layer& y, bool key) const {
  kernels::KvCodeSlots d;
  d.codes = (key ? y.codes_k : y.codes_v).as<uint8_t>();
  d.scales = (key ? y.scales_k : y.scales_v).as<uint16_t>();
  if (key && opts_.qjl) {
    d.qjl_bits = y.qjl_bits.as<uint8_t>();
    d.qjl_norm = y.qjl_norm.as<uint16_t>();
  }
  d.head_stride = code_cap_;
  return d;
}

void TurboQuantKvCache::RecordRoundtrip(const Layer& y, bool key, const void* src, bool f16,
                                        int64_t n, int64_t pos_stride, int64_t head_stride,
                                        int64_t slot0) {
  const KvVectorCodec& c = key ? kcodec_ : vcodec_;
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim;
  float x[1024], back[1024];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t at = i * pos_stride + h * head_stride, slot = h * code_cap_ + slot0 + i;
      if (f16)
        F16ToF32(static_cast<const uint16_t*>(src) + at, x, size_t(D));
      else
        std::copy_n(static_cast<const float*>(src) + at, D, x);
      c.Decode((key ? y.codes_k : y.codes_v).as<uint8_t>() + slot * c.code_bytes(),
               (key ? y.scales_k : y.scales_v).as<uint16_t>() + slot * c.groups(), back);
      stats_.Add(key, Cosine(x, back, D));
    }
  }
}

void TurboQuantKvCache::CodeOldestTail(Layer& y, int64_t m) {
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim;
  uint16_t* tail_k = y.tail_k.as<uint16_t>();
  uint16_t* tail_v = y.tail_v.as<uint16_t>();
  backend_->KvEncodePair(EncodeParams(y, true), tail_k, Slots(y, true), EncodeParams(y, false),
                         tail_v, Slots(y, false), DType::F16, m, H, D, tail_cap_ * D, y.coded);
  for (int kv = 0; kv < 2; ++kv) {
    const bool key = kv == 0;
    uint16_t* tail = key ? tail_k : tail_v;
    if (opts_.roundtrip_stats) RecordRoundtrip(y, key, tail, true, m, D, tail_cap_ * D, y.coded);
    for (int64_t h = 0; h < H; ++h) {  // the rest of each head's tail moves to its front
      uint16_t* head = tail + h * tail_cap_ * D;
      backend_->Copy(head, head + m * D, size_t((y.tail_len - m) * D) * sizeof(uint16_t));
    }
  }
  y.coded += m;
  y.tail_len -= m;
}

void TurboQuantKvCache::Append(int64_t layer, const float* k, const float* v, int64_t n) {
  CheckAppend(layer, n);
  Layer& y = layers_[size_t(layer)];
  if (y.dense) {
    dense_->Append(y.dense_index, k, v, n);
    return;
  }
  RollBack(y, size_);  // a re-append replaces uncommitted positions
  if (n <= 0) return;
  kernels::Backend& be = *backend_;
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, rows = n * H;
  // Rotated copies: [2, n, H, D] (keys then values), in the backend's memory.
  const size_t need = size_t(2 * std::max(rows, max_append_ * H) * D) * sizeof(float);
  if (scratch_.bytes() < need) {
    scratch_.Reset();  // the old one first: a device never holds both
    scratch_ = be.Allocate(need, "the TurboQuant KV cache's rotated rows");
  }
  float* rot = scratch_.as<float>();
  float* rot_v = rot + rows * D;
  if (y.stored() == 0 && (y.order_k || y.order_v)) SelectOutliers(y, k, v, n);
  for (int kv = 0; kv < 2; ++kv) {
    const bool key = kv == 0;
    const float* src = key ? k : v;
    float* dst = key ? rot : rot_v;
    const DeviceBuffer& order = key ? y.order_k : y.order_v;
    if (order) {  // outlier channels first (the view's k/v_order)
      be.GatherColumns(src, rows, D, order.as<int32_t>(), H, dst);
      src = dst;
    }
    const quant::HadamardRotation& r = key ? y.rk : y.rv;
    be.Rotate({(key ? y.rk_signs : y.rv_signs).as<int8_t>(), D, r.block()}, src, rows, dst);
  }
  // Values minus their mean over the first `center` positions (set when the layer is empty).
  if (opts_.center > 0)
    be.CenterRows(rot_v, n, H * D, y.mean_v.as<float>(),
                  y.stored() == 0 ? std::min(n, opts_.center) : 0);

  // Sink positions [size_, sink_cap_): fp16, position p in slot p.
  const int64_t sink_n = std::clamp<int64_t>(sink_cap_ - size_, 0, n);
  if (sink_n > 0) {
    be.KvStorePair(rot, rot_v, sink_n, H, D, y.sink_k.data(), y.sink_v.data(), DType::F16,
                   sink_cap_ * D, size_);
    y.sink_len += sink_n;
  }
  int64_t i = sink_n;
  if (i == n) return;
  if (opts_.window == 0) {
    // Every remaining position is coded now.
    const int64_t m = n - i;
    const float* src_k = rot + i * H * D;
    const float* src_v = rot_v + i * H * D;
    backend_->KvEncodePair(EncodeParams(y, true), src_k, Slots(y, true), EncodeParams(y, false),
                           src_v, Slots(y, false), DType::F32, m, H, H * D, D, y.coded);
    if (opts_.roundtrip_stats) {
      RecordRoundtrip(y, true, src_k, false, m, H * D, D, y.coded);
      RecordRoundtrip(y, false, src_v, false, m, H * D, D, y.coded);
    }
    y.coded += m;
    return;
  }
  // Recent window: fp16 tail, coded kBlock positions at a time once it holds window + kBlock.
  while (i < n) {
    const int64_t take = std::min(n - i, tail_cap_ - y.tail_len);
    be.KvStorePair(rot + i * H * D, rot_v + i * H * D, take, H, D, y.tail_k.data(), y.tail_v.data(),
                   DType::F16, tail_cap_ * D, y.tail_len);
    y.tail_len += take;
    i += take;
    if (y.tail_len >= opts_.window + kBlock) CodeOldestTail(y, kBlock);
  }
}

kernels::KvEncodeParams TurboQuantKvCache::EncodeParams(const Layer& y, bool key) const {
  kernels::KvEncodeParams p;
  p.format = key ? kformat_ : vformat_;
  p.scale = opts_.scale;
  if (key && opts_.qjl) {
    p.qjl_matrix = y.qjl_matrix.as<float>();
    p.qjl_m = y.sketch.m();
  }
  return p;
}

void TurboQuantKvCache::SelectOutliers(Layer& y, const float* k, const float* v, int64_t n) {
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, N = opts_.outliers;
  const int64_t m = std::min(n, opts_.center > 0 ? opts_.center : int64_t(256));
  std::vector<double> ss(static_cast<size_t>(D));
  std::vector<int32_t> idx(static_cast<size_t>(D)), order(static_cast<size_t>(H * D));
  std::vector<float> rows;  // a device's first m rows, downloaded (per-layer metadata)
  for (int kv = 0; kv < 2; ++kv) {
    DeviceBuffer& dst = kv == 0 ? y.order_k : y.order_v;
    if (!dst) continue;
    const float* x = kv == 0 ? k : v;
    if (backend_->memory_space() != MemorySpace::kHost) {
      rows.resize(size_t(m * H * D));
      backend_->Download(rows.data(), x, rows.size() * sizeof(float));
      x = rows.data();
    }
    for (int64_t h = 0; h < H; ++h) {
      std::fill(ss.begin(), ss.end(), 0.0);
      for (int64_t t = 0; t < m; ++t)
        for (int64_t j = 0; j < D; ++j) {
          const double e = x[(t * H + h) * D + j];
          ss[size_t(j)] += e * e;
        }
      for (int64_t j = 0; j < D; ++j) idx[size_t(j)] = int32_t(j);
      // The N channels of largest energy (ties: lower index), then each subset ascending.
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int32_t a, int32_t b) { return ss[size_t(a)] > ss[size_t(b)]; });
      std::sort(idx.begin(), idx.begin() + N);
      std::sort(idx.begin() + N, idx.end());
      std::copy(idx.begin(), idx.end(), order.begin() + h * D);
    }
    backend_->CopyToDevice(dst.data(), order.data(), order.size() * sizeof(int32_t));
  }
}

template <typename Ptr>
kernels::CompressedKvView TurboQuantKvCache::MakeView(const Layer& y,
                                                      const kernels::KvCodeFormat& kf,
                                                      const kernels::KvCodeFormat& vf,
                                                      Ptr ptr) const {
  kernels::CompressedKvView v;
  v.k_rotation = &y.rk;
  v.v_rotation = &y.rv;
  v.k_format = kf;
  v.v_format = vf;
  v.num_spans = 3;
  v.v_offset = opts_.center > 0 ? static_cast<const float*>(ptr(y.mean_v)) : nullptr;
  kernels::KvSpan& sink = v.spans[0];
  sink.begin = 0;
  sink.end = y.sink_len;
  sink.head_stride = sink_cap_;
  sink.k16 = static_cast<const uint16_t*>(ptr(y.sink_k));
  sink.v16 = static_cast<const uint16_t*>(ptr(y.sink_v));
  kernels::KvSpan& coded = v.spans[1];
  coded.begin = sink.end;
  coded.end = coded.begin + y.coded;
  coded.head_stride = code_cap_;
  coded.coded = true;
  coded.k_codes = static_cast<const uint8_t*>(ptr(y.codes_k));
  coded.v_codes = static_cast<const uint8_t*>(ptr(y.codes_v));
  coded.k_scales = static_cast<const uint16_t*>(ptr(y.scales_k));
  coded.v_scales = static_cast<const uint16_t*>(ptr(y.scales_v));
  if (opts_.qjl) {
    v.qjl_matrix = static_cast<const float*>(ptr(y.qjl_matrix));
    v.qjl_m = y.sketch.m();
    coded.k_qjl = static_cast<const uint8_t*>(ptr(y.qjl_bits));
    coded.k_qjl_norm = static_cast<const uint16_t*>(ptr(y.qjl_norm));
  }
  v.k_order = y.order_k ? static_cast<const int32_t*>(ptr(y.order_k)) : nullptr;
  v.v_order = y.order_v ? static_cast<const int32_t*>(ptr(y.order_v)) : nullptr;
  kernels::KvSpan& tail = v.spans[2];
  tail.begin = coded.end;
  tail.end = tail.begin + y.tail_len;
  tail.head_stride = tail_cap_;
  tail.k16 = static_cast<const uint16_t*>(ptr(y.tail_k));
  tail.v16 = static_cast<const uint16_t*>(ptr(y.tail_v));
  return v;
}

kernels::CompressedKvView TurboQuantKvCache::View(int64_t layer) const {
  return MakeView(layers_[size_t(layer)], kformat_, vformat_,
                  [](const DeviceBuffer& b) -> const void* { return b.data(); });
}

void TurboQuantKvCache::UseBackend(kernels::Backend& be) {
  KvCache::UseBackend(be);
  if (dense_) dense_->UseBackend(be);
}

void TurboQuantKvCache::Attend(int64_t layer, const float* q, int64_t n, float* out) const {
  CheckAppend(layer, n);
  const Layer& y = layers_[size_t(layer)];
  if (y.dense) {
    dense_->Attend(y.dense_index, q, n, out);
    return;
  }
  TQ_CHECK(y.stored() == size_ + n, "kv cache", "layer {} holds {} positions, attention needs {}",
           layer, y.stored(), size_ + n);
  kernels::AttentionParams p;
  p.num_heads = layout_.num_heads;
  p.num_kv_heads = layout_.num_kv_heads;
  p.head_dim = layout_.head_dim;
  p.scale = layout_.scale;
  p.window = 0;  // sliding-window layers are dense
  backend_->CompressedAttention(q, n, size_, View(layer), p, out);
}

void TurboQuantKvCache::Commit(int64_t n) {
  KvCache::Commit(n);
  if (dense_) dense_->Commit(n);
}

int64_t TurboQuantKvCache::MinTruncate() const { return dense_ ? dense_->MinTruncate() : 0; }

void TurboQuantKvCache::Truncate(int64_t n) {
  KvCache::Truncate(n);  // checks MinTruncate() first
  if (dense_) dense_->Truncate(n);
  for (Layer& y : layers_)
    if (!y.dense) RollBack(y, n);
}

void TurboQuantKvCache::FillSynthetic(int64_t n, uint64_t seed) {
  if (backend_->memory_space() != MemorySpace::kHost) {
    KvCache::FillSynthetic(n, seed);  // uploads chunks of rows
    return;
  }
  CheckAppend(0, n);
  const int64_t kChunk = std::min<int64_t>(256, max_append_);
  const int64_t width = layout_.num_kv_heads * layout_.head_dim;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(size_t(std::min(n, kChunk) * width)), v(k.size());
  for (int64_t t0 = 0; t0 < n; t0 += kChunk) {
    const int64_t m = std::min(kChunk, n - t0);
    for (int64_t l = 0; l < layout_.num_layers; ++l) {
      for (int64_t i = 0; i < m * width; ++i) {
        k[size_t(i)] = normal(rng);
        v[size_t(i)] = normal(rng);
      }
      Append(l, k.data(), v.data(), m);
    }
    Commit(m);
  }
}

void TurboQuantKvCache::DecodeLayer(int64_t layer, int64_t count, float* k, float* v) const {
  TQ_CHECK(layer >= 0 && layer < layout_.num_layers && IsCompressed(layer), "kv cache",
           "layer {} is not a compressed layer", layer);
  const Layer& y = layers_[size_t(layer)];
  TQ_CHECK(count >= 0 && count <= y.stored(), "kv cache", "layer {} holds {} positions, not {}",
           layer, y.stored(), count);
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim;
  // Host copies of the layer's arrays (device memory is downloaded; a sync point).
  const bool host = backend_->memory_space() == MemorySpace::kHost;
  std::vector<std::vector<uint8_t>> copies;
  copies.reserve(16);
  const kernels::CompressedKvView view =
      MakeView(y, kcodec_.format(), vcodec_.format(), [&](const DeviceBuffer& b) -> const void* {
        if (host || !b) return b.data();
        copies.emplace_back(b.bytes());
        backend_->Download(copies.back().data(), b.data(), b.bytes());
        return copies.back().data();
      });
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      for (int kv = 0; kv < 2; ++kv) {
        float* dst = (kv == 0 ? k : v) + (t * H + h) * D;
        for (const kernels::KvSpan& s : view.spans) {
          if (t < s.begin || t >= s.end) continue;
          const int64_t slot = h * s.head_stride + (t - s.begin);
          if (s.coded) {
            const KvVectorCodec& c = kv == 0 ? kcodec_ : vcodec_;
            c.Decode((kv == 0 ? s.k_codes : s.v_codes) + slot * c.code_bytes(),
                     (kv == 0 ? s.k_scales : s.v_scales) + slot * c.groups(), dst);
          } else {
            F16ToF32((kv == 0 ? s.k16 : s.v16) + slot * D, dst, size_t(D));
          }
        }
        if (opts_.center > 0 && kv == 1)
          for (int64_t j = 0; j < D; ++j) dst[j] += view.v_offset[h * D + j];
        (kv == 0 ? y.rk : y.rv).Inverse(dst);
        const int32_t* order = kv == 0 ? view.k_order : view.v_order;
        if (order) {  // back to the model's channel order
          float tmp[1024];
          std::copy_n(dst, D, tmp);
          for (int64_t j = 0; j < D; ++j) dst[order[h * D + j]] = tmp[j];
        }
      }
    }
  }
}

std::unique_ptr<KvCache> MakeTurboQuantKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                                               kernels::Backend& backend) {
  return std::make_unique<TurboQuantKvCache>(layout, opts, backend);
}

}  // namespace tq
