#include "kv/kv_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <random>

#include "core/error.h"

namespace tq {

std::string_view KvDTypeName(KvDType t) {
  switch (t) {
    case KvDType::kF16:
      return "f16";
    case KvDType::kBF16:
      return "bf16";
    case KvDType::kF32:
      return "f32";
  }
  return "?";
}

std::optional<KvDType> ParseKvDType(std::string_view s) {
  for (KvDType t : {KvDType::kF16, KvDType::kBF16, KvDType::kF32})
    if (s == KvDTypeName(t)) return t;
  return std::nullopt;
}

std::string_view KvScaleName(KvScale s) {
  switch (s) {
    case KvScale::kNorm:
      return "norm";
    case KvScale::kMse:
      return "mse";
    case KvScale::kUnbiased:
      return "unbiased";
  }
  return "?";
}

std::optional<KvScale> ParseKvScale(std::string_view s) {
  for (KvScale x : {KvScale::kNorm, KvScale::kMse, KvScale::kUnbiased})
    if (s == KvScaleName(x)) return x;
  return std::nullopt;
}

std::string_view KvCodebookName(KvCodebook c) {
  return c == KvCodebook::kGaussian ? "gaussian" : "sphere";
}

std::optional<KvCodebook> ParseKvCodebook(std::string_view s) {
  for (KvCodebook x : {KvCodebook::kGaussian, KvCodebook::kSphere})
    if (s == KvCodebookName(x)) return x;
  return std::nullopt;
}

int64_t KvLayerSlots(int64_t window, const KvCacheOptions& opts) {
  return window > 0 ? std::min(opts.max_tokens, window + opts.max_append) : opts.max_tokens;
}

KvCache::KvCache(KvLayout layout, int64_t capacity, int64_t max_append, kernels::Backend& backend)
    : layout_(std::move(layout)), backend_(&backend), capacity_(capacity), max_append_(max_append) {
  const KvLayout& l = layout_;
  TQ_CHECK((l.num_layers > 0 || !l.recurrent_floats.empty()) && l.num_heads > 0 &&
               l.num_kv_heads > 0 && l.head_dim > 0 && l.num_heads % l.num_kv_heads == 0,
           "kv cache", "bad layout: {} layers, {} heads, {} kv heads, head_dim {}", l.num_layers,
           l.num_heads, l.num_kv_heads, l.head_dim);
  TQ_CHECK(l.window.empty() || int64_t(l.window.size()) == l.num_layers, "kv cache",
           "{} sliding windows given for {} layers", l.window.size(), l.num_layers);
  TQ_CHECK(capacity > 0, "kv cache", "capacity must be positive, got {}", capacity);
  TQ_CHECK(max_append > 0, "kv cache", "max_append must be positive, got {}", max_append);
  for (int64_t w : layout_.window) TQ_CHECK(w >= 0, "kv cache", "sliding window {} is negative", w);
  if (layout_.window.empty()) layout_.window.assign(size_t(l.num_layers), 0);
  for (size_t r = 0; r < l.recurrent_floats.size(); ++r) {
    const int64_t f = l.recurrent_floats[r];
    TQ_CHECK(f > 0, "kv cache", "recurrent layer {} has {} state floats", r, f);
    state_.push_back(backend.Allocate(size_t(f) * sizeof(float),
                                      fmt::format("the recurrent state (layer {})", r)));
  }
  ResetRecurrent();
}

void KvCache::ResetRecurrent() {
  snapshots_.clear();
  for (size_t r = 0; r < state_.size(); ++r) {
    const std::vector<float> zero(size_t(layout_.recurrent_floats[r]), 0.0f);
    backend_->CopyToDevice(state_[r].data(), zero.data(), zero.size() * sizeof(float));
  }
}

int64_t KvCache::RecurrentBytes() const {
  int64_t per = 0;
  for (int64_t f : layout_.recurrent_floats) per += f * int64_t(sizeof(float));
  return per * int64_t(1 + snapshots_.size());
}

std::vector<int64_t> KvCache::SnapshotPositions() const {
  std::vector<int64_t> p;
  for (const Snapshot& s : snapshots_) p.push_back(s.position);
  return p;
}

int64_t KvCache::ReusablePrefix(int64_t n) const {
  n = std::min(n, size_);
  if (n <= 0) return 0;
  const int64_t floor = MinTruncate();
  if (state_.empty() || n == size_) return n >= floor ? n : 0;
  int64_t best = 0;
  for (const Snapshot& s : snapshots_)
    if (s.position <= n && s.position >= floor) best = s.position;
  return best;
}

void KvCache::UseBackend(kernels::Backend& be) {
  TQ_CHECK(be.memory_space() == backend_->memory_space(), "kv cache",
           "cannot move a cache from backend '{}' to '{}' (another memory space)", backend_->name(),
           be.name());
  backend_ = &be;
}

void KvCache::Truncate(int64_t n) {
  TQ_CHECK(n >= 0 && n <= size_, "kv cache", "cannot truncate {} tokens to {}", size_, n);
  const int64_t floor = MinTruncate();
  TQ_CHECK(n == 0 || n >= floor, "kv cache",
           "cannot truncate {} tokens to {}: sliding-window layers no longer hold the positions "
           "before {} (truncate to 0 or to at least {})",
           size_, n, n, floor);
  if (!state_.empty() && n != size_) {
    if (n == 0) {
      ResetRecurrent();
    } else {
      const auto it = std::find_if(snapshots_.begin(), snapshots_.end(),
                                   [&](const Snapshot& s) { return s.position == n; });
      TQ_CHECK(it != snapshots_.end(), "kv cache",
               "cannot truncate {} tokens to {}: the recurrent layers' state is held only at "
               "positions {} (truncate to 0, to one of those, or recompute)",
               size_, n, fmt::join(SnapshotPositions(), ", "));
      for (size_t r = 0; r < state_.size(); ++r)
        backend_->Copy(state_[r].data(), it->state[r].data(), state_[r].bytes());
      snapshots_.erase(it + 1, snapshots_.end());
    }
  }
  size_ = n;
}

void KvCache::Commit(int64_t n) {
  TQ_CHECK(n >= 0 && size_ + n <= capacity_, "kv cache",
           "cannot commit {} tokens: {} stored, capacity {}", n, size_, capacity_);
  size_ += n;
  if (state_.empty() || n <= 1) return;
  // A prompt chunk: snapshot the state (the oldest snapshot's buffers are reused when full).
  Snapshot s;
  if (int(snapshots_.size()) == kMaxSnapshots) {
    s = std::move(snapshots_.front());
    snapshots_.erase(snapshots_.begin());
  } else {
    for (size_t r = 0; r < state_.size(); ++r)
      s.state.push_back(backend_->Allocate(state_[r].bytes(), "a recurrent state snapshot"));
  }
  s.position = size_;
  for (size_t r = 0; r < state_.size(); ++r)
    backend_->Copy(s.state[r].data(), state_[r].data(), state_[r].bytes());
  snapshots_.push_back(std::move(s));
}

void KvCache::CheckAppend(int64_t layer, int64_t n) const {
  TQ_CHECK(layer >= 0 && layer < layout_.num_layers, "kv cache", "layer {} out of range [0, {})",
           layer, layout_.num_layers);
  TQ_CHECK(n >= 0 && size_ + n <= capacity_, "kv cache",
           "{} new tokens overflow the cache: {} stored, capacity {}", n, size_, capacity_);
}

void KvCache::FillSynthetic(int64_t n, uint64_t seed) {
  CheckAppend(0, n);
  const int64_t width = layout_.num_kv_heads * layout_.head_dim;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (backend_->memory_space() == MemorySpace::kHost) {
    std::vector<float> k(static_cast<size_t>(width)), v(static_cast<size_t>(width));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t l = 0; l < layout_.num_layers; ++l) {
        for (auto& x : k) x = normal(rng);
        for (auto& x : v) x = normal(rng);
        Append(l, k.data(), v.data(), 1);
      }
      Commit(1);
    }
    return;
  }
  // Device memory: chunks of positions per layer, uploaded (the same distribution; another draw
  // order than the host loop).
  const int64_t chunk = std::min<int64_t>(max_append_, 256);
  std::vector<float> host(size_t(2 * chunk * width));
  DeviceBuffer dev = backend_->Allocate(host.size() * sizeof(float), "synthetic KV rows");
  for (int64_t t = 0; t < n; t += chunk) {
    const int64_t c = std::min(chunk, n - t);
    for (int64_t l = 0; l < layout_.num_layers; ++l) {
      for (int64_t i = 0; i < 2 * c * width; ++i) host[size_t(i)] = normal(rng);
      backend_->CopyToDevice(dev.data(), host.data(), size_t(2 * c * width) * sizeof(float));
      Append(l, dev.as<float>(), dev.as<float>() + c * width, c);
      backend_->Synchronize();  // `host` is refilled next
    }
    Commit(c);
  }
}

}  // namespace tq
