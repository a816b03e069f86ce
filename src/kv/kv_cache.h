// The KV cache of one sequence: keys and values of every layer, positions 0 .. size()-1.
// Attention is a method of the cache, so a compressed cache (TurboQuant codes, DESIGN.md §3)
// attends on its own storage without decompressing it; the model only appends and attends.
//
// One forward pass over n new tokens: for every layer, Append(layer, k, v, n) then
// Attend(layer, q, n, out) (which sees the n appended tokens); after the last layer, Commit(n).
//
// Sliding-window layers (KvLayout::window > 0) keep only their window: a query at position p reads
// keys p-window+1 .. p, so such a layer stores at most
//     KvLayerSlots(window, opts) = min(max_tokens, window + max_append)
// positions. One Append of n <= max_append tokens at position s needs the window-1 positions
// before s plus the n new ones (window - 1 + n slots: llama.cpp sizes its SWA caches window +
// batch the same way). The slots are a sliding buffer: when an Append would run past its end, the
// positions the new queries still read (from s-window+1) move to the front, once every
// max_append+1 or more tokens; attention runs on the contiguous slots with absolute positions
// (RoPE is applied before Append), so the window mask is the one of the full cache. Memory of a
// window layer stops growing at its slot count; kv_cache_bytes.h projects with the same rule.
// A cache whose window layers dropped positions can be truncated only to 0 or to a size whose
// window it still holds (MinTruncate()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/backend.h"

namespace tq {

enum class KvDType { kF16, kBF16, kF32 };

std::string_view KvDTypeName(KvDType t);                  // "f16", "bf16", "f32"
std::optional<KvDType> ParseKvDType(std::string_view s);  // the same spellings

// TurboQuant KV compression (DESIGN.md §3, kv/turboquant_codec.h).
// Per-vector scale: RMS (‖x‖/√D), MSE-optimal, or MSE-optimal codes with the scale that makes the
// reconstruction unbiased along x (x̂·x = ‖x‖²: no systematic shrink of q·k or of Σ p v). The
// kernels' enum (KvEncode takes it).
using KvScale = kernels::KvScale;
enum class KvCodebook { kGaussian, kSphere };  // Lloyd-Max for N(0,1) or the rotated-sphere law

std::string_view KvScaleName(KvScale s);  // "norm", "mse", "unbiased"
std::optional<KvScale> ParseKvScale(std::string_view s);
std::string_view KvCodebookName(KvCodebook c);  // "gaussian", "sphere"
std::optional<KvCodebook> ParseKvCodebook(std::string_view s);

// Model::Forward runs prompts in chunks of at most this many tokens (and of max_append).
inline constexpr int64_t kDefaultMaxAppend = 512;

struct KvCacheOptions {
  int64_t max_tokens = 4096;      // positions 0 .. max_tokens-1 (the context)
  KvDType dtype = KvDType::kF16;  // the plain cache, and the fp16-kept parts stay fp16

  // TurboQuant codec. k_bits = v_bits = 0: a plain cache of `dtype`. Otherwise both in
  // {2, 2.5, 3, 3.5, 4, 8}: keys and values of full-attention layers are stored rotated and coded.
  double k_bits = 0, v_bits = 0;
  int64_t sink = 0;      // the first `sink` positions stay fp16
  int64_t window = 0;    // the most recent `window` positions stay fp16 (coded in blocks of 32)
  int64_t boundary = 0;  // the first and last `boundary` layers are plain fp16 caches
  // Defaults: what measured best on the shared models (docs/BENCHMARKS.md, "KV cache").
  KvScale scale = KvScale::kMse;
  KvCodebook codebook = KvCodebook::kSphere;
  // Value mean-centering (exact up to the codec's error): per layer and kv head, values are stored
  // minus their mean over the first `center` positions of the sequence (from the first Append)
  // and attention adds the mean back (Σ p = 1). 0: off. Keys are not centered: RoPE turns a fixed
  // channel offset into a position-dependent one, so a first-block key mean does not shrink later
  // keys (measured: it grows them in 4 of 6 layers of tq-llama-21m). 256 positions: the mean
  // of a longer block is a better estimate (tq-llama-21m K4V4: 64 → +0.65%, 128 → +0.61%,
  // 256 → +0.59% on eval_brown); a prompt shorter than that centers on what it has.
  int64_t center = 256;
  uint64_t seed = 0x6b76717475726271ull;  // rotation signs (stored in the cache object)
  // The most tokens one forward pass appends (Model::Forward chunks prompts by it): sizes the
  // sliding-window layers' buffers (KvLayerSlots). Last, so positional initializers still work.
  int64_t max_append = kDefaultMaxAppend;
  // QJL residual sketch of coded keys (kv/qjl_sketch.h; off by default): k_bits counts the sign
  // bit, so keys are coded at k_bits - 1 by the MSE codec plus head_dim sign bits and an fp16
  // residual norm; scores become unbiased. k_bits in {2, 2.5, 3, 3.5, 4}. Values are unchanged.
  bool qjl = false;
  // The paper's outlier-channel split (0 = off): per compressed layer and kv head, the `outliers`
  // channels of largest RMS over the first block of the sequence's own vectors (the first
  // `center` positions of the first Append, 256 when center is 0) are coded by their own
  // TurboQuant instance (own rotation, own scale) at more bits than the other channels (another
  // instance), at the same total bits: KvOutlierSplit (kv/turboquant_codec.h), e.g. head_dim 64,
  // 32 outliers: 3 bits = 32 at 4 + 32 at 2, 2.5 = 32 at 3 + 32 at 2. Applies to K and V; a side
  // whose width has no exact split (4 or 8 bits) stays unsplit. A multiple of 32 below head_dim.
  int64_t outliers = 0;
  // Measurement only (perplexity --kv-stats): decode every coded vector again and record its
  // roundtrip cosine (TurboQuantKvCache::stats(), GlobalKvRoundtripStats()). Off by default: it
  // costs one more decode per coded vector.
  bool roundtrip_stats = false;

  bool compressed() const { return k_bits > 0 || v_bits > 0; }
};

// The attention geometry a model gives its caches.
struct KvLayout {
  int64_t num_layers = 0;
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;
  float scale = 1.0f;           // softmax scale on q·k (1/sqrt(head_dim) for every model here)
  std::vector<int64_t> window;  // per layer: sliding window in tokens, 0 = full attention
  // Attention variants of the newer families: scores soft-capped as softcap · tanh(s / softcap)
  // (gemma2; 0 = none) and per-layer sink logits ([num_heads] in the backend's memory, gpt_oss;
  // empty or null = none). A plain cache attends with Backend::AttentionVariant; the TurboQuant
  // cache refuses them (MakeKvCache says so).
  float softcap = 0;
  std::vector<const float*> sinks;
  // Multi-head latent attention (deepseek): the layers cache one latent head [c_kv | k_pe] per
  // token, already the compressed form, stored once: the plain cache's values are its keys (the
  // forward pass keeps only the c_kv channels of the output, so the k_pe channels that a value
  // [c_kv | 0] would have zeroed never matter); the TurboQuant cache refuses it (MakeKvCache
  // says so).
  bool latent = false;
  bool HasVariant(int64_t layer) const {
    return softcap > 0 || (size_t(layer) < sinks.size() && sinks[size_t(layer)] != nullptr);
  }
  // The fixed-size state of the recurrent layers (Gated DeltaNet, Mamba-2), one entry per such
  // layer in model order: floats of its conv history + recurrent state (fp32). These layers
  // have no keys and values: num_layers counts only the attention layers.
  std::vector<int64_t> recurrent_floats;
};

// Positions a layer of a cache made with `opts` stores: max_tokens for full attention
// (window 0); min(max_tokens, window + max_append) for a sliding-window layer.
int64_t KvLayerSlots(int64_t window, const KvCacheOptions& opts);

class KvCache {
 public:
  virtual ~KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvLayout& layout() const { return layout_; }
  // The backend whose memory holds the cache and whose ops append and attend (the model's).
  kernels::Backend& backend() const { return *backend_; }
  // Runs the cache's ops on another backend of the same memory space (tests attend one cache
  // with ref and with cpu). Throws when the memory spaces differ.
  virtual void UseBackend(kernels::Backend& be);
  int64_t size() const { return size_; }          // tokens stored (positions 0 .. size()-1)
  int64_t capacity() const { return capacity_; }  // positions: the context (max_tokens)
  int64_t max_append() const { return max_append_; }
  // Keeps the first n tokens (n <= size()): prefix reuse, or dropping a rejected suffix. n must be
  // 0 or >= MinTruncate() (throws tq::Error otherwise, leaving the cache as it was).
  virtual void Truncate(int64_t n);
  // The smallest n > 0 that Truncate accepts: sliding-window layers that dropped positions can
  // only continue from a size whose previous window-1 positions they still hold. 0 when every
  // n <= size() is accepted.
  virtual int64_t MinTruncate() const { return 0; }
  // Bytes of cache storage per stored position over all layers (keys and values).
  virtual int64_t BytesPerToken() const = 0;
  // Bytes of storage written so far (what the cache makes resident): sliding-window layers stop
  // at their slots; the recurrent state and its snapshots count (RecurrentBytes()). Default:
  // BytesPerToken() * size() + RecurrentBytes().
  virtual int64_t MemoryBytes() const { return BytesPerToken() * size_ + RecurrentBytes(); }

  // --- recurrent state (layout().recurrent_floats; kv_cache.cc) ---
  // The state of recurrent layer r (in model order), [recurrent_floats[r]] fp32 in the
  // backend's memory, zero for an empty sequence; the model's recurrent ops update it in place.
  // Recurrent state cannot be cut at an arbitrary position, so the cache keeps snapshots of all
  // of it at the ends of the last kMaxSnapshots multi-token commits (prompt chunks); Truncate
  // to n > 0 restores the snapshot at n (or keeps all when n == size()), and ReusablePrefix
  // says which n that allows. Decode steps (1-token commits) take no snapshot.
  static constexpr int kMaxSnapshots = 4;
  int64_t num_recurrent() const { return int64_t(state_.size()); }
  float* RecurrentState(int64_t r) { return state_.at(size_t(r)).as<float>(); }
  // Bytes of recurrent state and snapshots held.
  int64_t RecurrentBytes() const;
  // Positions at which a snapshot is held (ascending).
  std::vector<int64_t> SnapshotPositions() const;
  // The longest prefix of at most n tokens that Truncate accepts and keeps (0 when none):
  // n itself without recurrent layers (when >= MinTruncate()), else the largest snapshot
  // position <= n (or size() when n >= size()).
  virtual int64_t ReusablePrefix(int64_t n) const;

  // Stores k, v [n, num_kv_heads, head_dim] (fp32, in the backend's memory) of `layer` at
  // positions size() .. size()+n-1. Throws when size() + n > capacity().
  virtual void Append(int64_t layer, const float* k, const float* v, int64_t n) = 0;
  // q [n, num_heads, head_dim] at positions size() .. size()+n-1 attends causally (and within
  // the layer's window) over positions 0 .. size()+n-1 of `layer` -> out [n, num_heads, head_dim]
  // (q and out in the backend's memory). The n tokens must have been appended to `layer`.
  virtual void Attend(int64_t layer, const float* q, int64_t n, float* out) const = 0;
  // Makes the n tokens appended to every layer part of the cache: size() += n.
  virtual void Commit(int64_t n);

  // Appends n tokens of random keys/values with unit-RMS entries to every layer and commits them
  // (bench: decode speed at a long context without a long prefill).
  virtual void FillSynthetic(int64_t n, uint64_t seed);

 protected:
  KvCache(KvLayout layout, int64_t capacity, int64_t max_append, kernels::Backend& backend);
  void CheckAppend(int64_t layer, int64_t n) const;

  KvLayout layout_;
  kernels::Backend* backend_;
  std::vector<DeviceBuffer> state_;  // [recurrent layers] current state
  struct Snapshot {
    int64_t position = 0;
    std::vector<DeviceBuffer> state;  // a copy of state_ at `position`
  };
  std::vector<Snapshot> snapshots_;  // ascending positions, at most kMaxSnapshots
  void ResetRecurrent();             // zero state, no snapshots
  int64_t capacity_ = 0;
  int64_t max_append_ = kDefaultMaxAppend;
  int64_t size_ = 0;
};

// A cache holding opts.max_tokens tokens (sliding-window layers: their window, above): plain
// fp16/bf16/fp32 (opts.dtype), or TurboQuant when opts.compressed() (throws tq::Error naming the
// bad option).
// Storage and ops on `backend` (the model's: Model::NewCache passes it).
std::unique_ptr<KvCache> MakeKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                                     kernels::Backend& backend = kernels::CpuBackend());
// The TurboQuant cache (kv/turboquant_kv_cache.cc); MakeKvCache calls it when opts.compressed().
std::unique_ptr<KvCache> MakeTurboQuantKvCache(const KvLayout& layout, const KvCacheOptions& opts,
                                               kernels::Backend& backend);

}  // namespace tq
