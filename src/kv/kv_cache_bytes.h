// What a KV cache will occupy, without filling one: the projection `plan` makes. Kept next to the
// caches so every cache kind projects by its own storage formula.
#pragma once

#include <cstdint>

#include "kv/kv_cache.h"

namespace tq {

// Bytes of storage a cache made by MakeKvCache(layout, opts) holds once `tokens` tokens are
// stored (all layers, keys and values). It asks the cache itself: a cache of capacity `tokens`
// is made (its storage is allocated untouched, so it costs address space, not memory) and its
// BytesPerToken() scaled. A cache kind whose storage is not linear in the token count (fp16 sink
// or recent window, ring buffers for sliding-window layers) must be special-cased here.
int64_t KvCacheBytes(const KvLayout& layout, const KvCacheOptions& opts, int64_t tokens);

}  // namespace tq
