// What a KV cache will occupy, without filling one: the projection `plan` makes. Kept next to the
// caches so every cache kind projects by its own storage formula.
#pragma once

#include <cstdint>

#include "kv/kv_cache.h"

namespace tq {

// Bytes of storage a cache made by MakeKvCache(layout, opts) holds once `tokens` tokens are
// stored (all layers, keys and values; opts.max_tokens is ignored: the context is `tokens`).
// Plain layers: min(tokens, KvLayerSlots(window, opts)) positions each, the rule the caches
// allocate by (kv_cache.h), so a sliding-window layer stops at window + opts.max_append. The
// TurboQuant cache's compressed layers: fp16 sink and recent window plus coded positions (its
// codec is asked for the code sizes: a cache is made, untouched, which costs address space only).
// The recurrent layers' state (layout.recurrent_floats) counts once (snapshots not included).
int64_t KvCacheBytes(const KvLayout& layout, const KvCacheOptions& opts, int64_t tokens);

}  // namespace tq
