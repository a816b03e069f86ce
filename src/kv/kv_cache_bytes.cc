#include "kv/kv_cache_bytes.h"

#include <algorithm>

#include "core/error.h"
#include "kv/turboquant_kv_cache.h"

namespace tq {
namespace {

// The TurboQuant cache (turboquant_kv_cache.h): per compressed layer and kv head, the first
// `sink` positions in fp16, the recent window in an fp16 tail of up to window + 32 positions,
// every other position coded; boundary and sliding-window layers are a plain cache.
int64_t TurboQuantBytes(const TurboQuantKvCache& c, const KvCacheOptions& o, int64_t tokens) {
  const KvLayout& l = c.layout();
  const int64_t H = l.num_kv_heads, D = l.head_dim;
  const int64_t coded_per_head = c.key_codec().code_bytes() + 2 * c.key_codec().groups() +
                                 c.value_codec().code_bytes() + 2 * c.value_codec().groups();
  int64_t compressed = 0;
  for (int64_t i = 0; i < l.num_layers; ++i) compressed += c.IsCompressed(i);
  const int64_t dense_per_token = c.BytesPerToken() - compressed * H * coded_per_head;
  const int64_t sink = std::min(tokens, o.sink), rest = tokens - sink;
  const int64_t tail = o.window > 0 ? std::min(rest, o.window + TurboQuantKvCache::kBlock) : 0;
  const int64_t coded = o.window > 0 ? std::max<int64_t>(0, rest - o.window) : rest;
  const int64_t fp16_kv = 2 * D * 2;  // one position's key and value of one head in fp16
  const int64_t per_layer = H * ((sink + tail) * fp16_kv + coded * coded_per_head);
  return dense_per_token * tokens + compressed * per_layer;
}

}  // namespace

int64_t KvCacheBytes(const KvLayout& layout, const KvCacheOptions& opts, int64_t tokens) {
  TQ_CHECK(tokens >= 0, "kv cache bytes", "negative token count {}", tokens);
  KvCacheOptions o = opts;
  o.max_tokens = std::max<int64_t>(tokens, 1);
  const std::unique_ptr<KvCache> cache = MakeKvCache(layout, o);
  if (const auto* tq = dynamic_cast<const TurboQuantKvCache*>(cache.get()))
    return TurboQuantBytes(*tq, o, tokens);
  return cache->BytesPerToken() * tokens;
}

}  // namespace tq
