#include "kv/turboquant_kv_cache.h"

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
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, L = layout_.num_layers;
  sink_cap_ = std::min(opts.sink, capacity_);
  tail_cap_ = opts.window > 0 ? opts.window + kBlock : 0;
  code_cap_ = capacity_ - sink_cap_;
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
    if (kcodec_.outliers() > 0) y.order_k.resize(size_t(H * D));
    if (vcodec_.outliers() > 0) y.order_v.resize(size_t(H * D));
    y.sink_k.resize(size_t(H * sink_cap_ * D));
    y.sink_v.resize(size_t(H * sink_cap_ * D));
    y.tail_k.resize(size_t(H * tail_cap_ * D));
    y.tail_v.resize(size_t(H * tail_cap_ * D));
    y.codes_k.resize(size_t(H * code_cap_ * kcodec_.code_bytes()));
    y.codes_v.resize(size_t(H * code_cap_ * vcodec_.code_bytes()));
    y.scales_k.resize(size_t(H * code_cap_ * kcodec_.groups()));
    y.scales_v.resize(size_t(H * code_cap_ * vcodec_.groups()));
    if (opts.center > 0) y.mean_v.resize(size_t(H * D));
    if (opts.qjl) {
      y.sketch =
          KvQjlSketch(D, opts.seed ^ (0x716a6c5f736b6574ull + uint64_t(l) * 0x9e3779b97f4a7c15ull));
      y.qjl_bits.resize(size_t(H * code_cap_ * y.sketch.sign_bytes()));
      y.qjl_norm.resize(size_t(H * code_cap_));
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

double TurboQuantKvCache::EncodeInto(Layer& y, bool key, int64_t h, int64_t slot,
                                     const float* rotated) {
  const KvVectorCodec& c = key ? kcodec_ : vcodec_;
  const int64_t at = h * code_cap_ + slot;
  uint8_t* codes = (key ? y.codes_k : y.codes_v).data() + at * c.code_bytes();
  uint16_t* scales = (key ? y.scales_k : y.scales_v).data() + at * c.groups();
  c.Encode(rotated, codes, scales);
  const bool sketch = key && opts_.qjl;
  // The reconstruction is needed only for the QJL residual and for measured statistics.
  if (!sketch && !opts_.roundtrip_stats) return 1.0;
  float back[1024];
  c.Decode(codes, scales, back);
  if (sketch) {  // the residual's sketch, in the same slot
    float residual[1024];
    for (int64_t i = 0; i < c.dim(); ++i) residual[i] = rotated[i] - back[i];
    y.sketch.Encode(residual, y.qjl_bits.data() + at * y.sketch.sign_bytes(),
                    y.qjl_norm.data() + at);
  }
  return Cosine(rotated, back, c.dim());
}

void TurboQuantKvCache::CodeOldestTail(Layer& y, int64_t m) {
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim;
  float x[1024];
  for (int64_t h = 0; h < H; ++h) {
    for (int kv = 0; kv < 2; ++kv) {
      uint16_t* tail = (kv == 0 ? y.tail_k : y.tail_v).data() + h * tail_cap_ * D;
      for (int64_t j = 0; j < m; ++j) {
        F16ToF32(tail + j * D, x, size_t(D));
        const double cos = EncodeInto(y, kv == 0, h, y.coded + j, x);
        if (opts_.roundtrip_stats) stats_.Add(kv == 0, cos);
      }
      std::memmove(tail, tail + m * D, size_t((y.tail_len - m) * D) * sizeof(uint16_t));
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
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, rows = n * H;
  // Rotated copies: [2, n, H, D] (keys then values).
  if (scratch_.size() < size_t(2 * rows * D)) scratch_.resize(size_t(2 * rows * D));
  float* rot = scratch_.data();
  if (y.stored() == 0 && (y.order_k.size() > 0 || y.order_v.size() > 0)) SelectOutliers(y, k, v, n);
  for (int kv = 0; kv < 2; ++kv) {
    const float* src = kv == 0 ? k : v;
    float* dst = rot + kv * rows * D;
    const AlignedBuffer<int32_t>& order = kv == 0 ? y.order_k : y.order_v;
    if (order.size() == 0) {
      std::memcpy(dst, src, size_t(rows * D) * sizeof(float));
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) {  // outlier channels first (the view's k/v_order)
      const int32_t* o = order.data() + (r % H) * D;
      for (int64_t j = 0; j < D; ++j) dst[r * D + j] = src[r * D + o[j]];
    }
  }
  ThreadPool::Global().ParallelFor(2 * rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) (r < rows ? y.rk : y.rv).Forward(rot + r * D);
  });

  if (opts_.center > 0) Center(y, rot, n);

  int64_t i = 0;
  // Sink positions: fp16.
  for (; i < n && size_ + i < sink_cap_; ++i) {
    const int64_t pos = size_ + i;
    for (int64_t h = 0; h < H; ++h) {
      F32ToF16(rot + (i * H + h) * D, y.sink_k.data() + (h * sink_cap_ + pos) * D, size_t(D));
      F32ToF16(rot + (rows + i * H + h) * D, y.sink_v.data() + (h * sink_cap_ + pos) * D,
               size_t(D));
    }
    ++y.sink_len;
  }
  if (i == n) return;
  if (opts_.window == 0) {
    // Every remaining position is coded now, in parallel over (position, head, K|V).
    const int64_t m = n - i, tasks = 2 * m * H;
    if (cos_.size() < size_t(tasks)) cos_.resize(size_t(tasks));
    ThreadPool::Global().ParallelFor(tasks, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const bool key = t < m * H;
        const int64_t r = key ? t : t - m * H, j = r / H, h = r % H;
        const float* x = rot + ((key ? 0 : rows) + (i + j) * H + h) * D;
        cos_[size_t(t)] = EncodeInto(y, key, h, y.coded + j, x);
      }
    });
    if (opts_.roundtrip_stats)
      for (int64_t t = 0; t < tasks; ++t) stats_.Add(t < m * H, cos_[size_t(t)]);
    y.coded += m;
    return;
  }
  // Recent window: fp16 tail, coded kBlock positions at a time once it holds window + kBlock.
  for (; i < n; ++i) {
    for (int64_t h = 0; h < H; ++h) {
      F32ToF16(rot + (i * H + h) * D, y.tail_k.data() + (h * tail_cap_ + y.tail_len) * D,
               size_t(D));
      F32ToF16(rot + (rows + i * H + h) * D, y.tail_v.data() + (h * tail_cap_ + y.tail_len) * D,
               size_t(D));
    }
    if (++y.tail_len >= opts_.window + kBlock) CodeOldestTail(y, kBlock);
  }
}

void TurboQuantKvCache::Center(Layer& y, float* rot, int64_t n) {
  const int64_t HD = layout_.num_kv_heads * layout_.head_dim;
  float* v = rot + n * HD;  // the values: [n, H * D]
  float* mean = y.mean_v.data();
  if (y.stored() == 0) {
    const int64_t m = std::min(n, opts_.center);
    std::fill(mean, mean + HD, 0.0f);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t j = 0; j < HD; ++j) mean[j] += v[t * HD + j];
    for (int64_t j = 0; j < HD; ++j) mean[j] /= float(m);
  }
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < HD; ++j) v[t * HD + j] -= mean[j];
}

void TurboQuantKvCache::SelectOutliers(Layer& y, const float* k, const float* v, int64_t n) const {
  const int64_t H = layout_.num_kv_heads, D = layout_.head_dim, N = opts_.outliers;
  const int64_t m = std::min(n, opts_.center > 0 ? opts_.center : int64_t(256));
  std::vector<double> ss(static_cast<size_t>(D));
  std::vector<int32_t> idx(static_cast<size_t>(D));
  for (int kv = 0; kv < 2; ++kv) {
    AlignedBuffer<int32_t>& order = kv == 0 ? y.order_k : y.order_v;
    if (order.size() == 0) continue;
    const float* x = kv == 0 ? k : v;
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
      std::copy(idx.begin(), idx.end(), order.data() + h * D);
    }
  }
}

kernels::CompressedKvView TurboQuantKvCache::View(int64_t layer) const {
  const Layer& y = layers_[size_t(layer)];
  kernels::CompressedKvView v;
  v.k_rotation = &y.rk;
  v.v_rotation = &y.rv;
  v.k_format = kcodec_.format();
  v.v_format = vcodec_.format();
  v.num_spans = 3;
  v.v_offset = opts_.center > 0 ? y.mean_v.data() : nullptr;
  kernels::KvSpan& sink = v.spans[0];
  sink.begin = 0;
  sink.end = y.sink_len;
  sink.head_stride = sink_cap_;
  sink.k16 = y.sink_k.data();
  sink.v16 = y.sink_v.data();
  kernels::KvSpan& coded = v.spans[1];
  coded.begin = sink.end;
  coded.end = coded.begin + y.coded;
  coded.head_stride = code_cap_;
  coded.coded = true;
  coded.k_codes = y.codes_k.data();
  coded.v_codes = y.codes_v.data();
  coded.k_scales = y.scales_k.data();
  coded.v_scales = y.scales_v.data();
  if (opts_.qjl) {
    v.qjl_matrix = y.sketch.matrix();
    v.qjl_m = y.sketch.m();
    coded.k_qjl = y.qjl_bits.data();
    coded.k_qjl_norm = y.qjl_norm.data();
  }
  v.k_order = y.order_k.size() == 0 ? nullptr : y.order_k.data();
  v.v_order = y.order_v.size() == 0 ? nullptr : y.order_v.data();
  kernels::KvSpan& tail = v.spans[2];
  tail.begin = coded.end;
  tail.end = tail.begin + y.tail_len;
  tail.head_stride = tail_cap_;
  tail.k16 = y.tail_k.data();
  tail.v16 = y.tail_v.data();
  return v;
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
  const kernels::CompressedKvView view = View(layer);
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
          for (int64_t j = 0; j < D; ++j) dst[j] += y.mean_v[size_t(h * D + j)];
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
  // The codec encodes on the host and its storage is host memory (the device encode and the
  // device attention kernels are the GPU issue's next step).
  TQ_CHECK(backend.memory_space() == MemorySpace::kHost, "kv cache",
           "the TurboQuant KV cache (--kv-bits / --kv-k-bits / --kv-v-bits) does not run on {} "
           "yet: use a plain cache there (--kv-dtype f16|bf16|f32) or --device cpu",
           backend.name());
  return std::make_unique<TurboQuantKvCache>(layout, opts, backend);
}

}  // namespace tq
