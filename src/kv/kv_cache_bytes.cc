#include "kv/kv_cache_bytes.h"

#include <algorithm>

#include "core/error.h"
#include "kv/turboquant_kv_cache.h"

namespace tq {
namespace {

int64_t ElementBytes(KvDType t) { return t == KvDType::kF32 ? 4 : 2; }

// A plain layer (dense cache, or a boundary / sliding-window layer of the TurboQuant cache):
// keys and values of min(tokens, its slots) positions (a latent layout: keys only, which are
// also its values).
int64_t PlainLayerBytes(const KvLayout& l, int64_t layer, const KvCacheOptions& o, int64_t tokens) {
  const int64_t positions = std::min(tokens, KvLayerSlots(l.window[size_t(layer)], o));
  return positions * (l.latent ? 1 : 2) * l.num_kv_heads * l.head_dim * ElementBytes(o.dtype);
}

// The TurboQuant cache (turboquant_kv_cache.h): per compressed layer and kv head, the first
// `sink` positions in fp16, the recent window in an fp16 tail of up to window + 32 positions,
// every other position coded (codes, scales and, with qjl, the key sketches); boundary and
// sliding-window layers are plain.
int64_t TurboQuantBytes(const TurboQuantKvCache& c, const KvCacheOptions& o, int64_t tokens) {
  const KvLayout& l = c.layout();
  const int64_t H = l.num_kv_heads, D = l.head_dim;
  const int64_t coded_per_head = c.CodedBytesPerHead();
  int64_t compressed = 0, plain = 0;
  for (int64_t i = 0; i < l.num_layers; ++i) {
    if (c.IsCompressed(i)) {
      ++compressed;
    } else {
      plain += PlainLayerBytes(l, i, o, tokens);
    }
  }
  const int64_t sink = std::min(tokens, o.sink), rest = tokens - sink;
  const int64_t tail = o.window > 0 ? std::min(rest, o.window + TurboQuantKvCache::kBlock) : 0;
  const int64_t coded = o.window > 0 ? std::max<int64_t>(0, rest - o.window) : rest;
  const int64_t fp16_kv = 2 * D * 2;  // one position's key and value of one head in fp16
  const int64_t per_layer = H * ((sink + tail) * fp16_kv + coded * coded_per_head);
  return plain + compressed * per_layer;
}

}  // namespace

int64_t KvCacheBytes(const KvLayout& layout, const KvCacheOptions& opts, int64_t tokens) {
  TQ_CHECK(tokens >= 0, "kv cache bytes", "negative token count {}", tokens);
  KvCacheOptions o = opts;
  o.max_tokens = std::max<int64_t>(tokens, 1);
  // A one-position cache validates the layout and options and answers which layers are
  // compressed; the bytes are counted below. (A cache of `tokens` positions would allocate, and
  // its zero-filled buffers touch, what it measures: plan's peak RSS grew by the cache it planned,
  // and planning a long context of a big model could run out of memory.)
  KvCacheOptions probe = o;
  probe.max_tokens = 1;
  const std::unique_ptr<KvCache> cache = MakeKvCache(layout, probe);
  // The recurrent layers' state (no snapshots: what one sequence holds while it decodes).
  int64_t bytes = 0;
  for (int64_t f : layout.recurrent_floats) bytes += f * int64_t(sizeof(float));
  if (const auto* tq = dynamic_cast<const TurboQuantKvCache*>(cache.get()))
    return bytes + TurboQuantBytes(*tq, o, tokens);
  for (int64_t i = 0; i < cache->layout().num_layers; ++i)
    bytes += PlainLayerBytes(cache->layout(), i, o, tokens);
  return bytes;
}

}  // namespace tq
