#include "kv/kv_cache_bytes.h"

#include <algorithm>

#include "core/error.h"

namespace tq {

int64_t KvCacheBytes(const KvLayout& layout, const KvCacheOptions& opts, int64_t tokens) {
  TQ_CHECK(tokens >= 0, "kv cache bytes", "negative token count {}", tokens);
  KvCacheOptions o = opts;
  o.max_tokens = std::max<int64_t>(tokens, 1);
  return MakeKvCache(layout, o)->BytesPerToken() * tokens;
}

}  // namespace tq
