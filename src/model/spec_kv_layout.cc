// KvLayoutOf: the cache layout a model's per-layer spec implies (Model::kv_layout adds the sink
// pointers of its loaded weights; plan projects cache bytes from this).
#include "kv/kv_cache.h"
#include "model/layer_spec.h"

namespace tq {

KvLayout KvLayoutOf(const ModelSpec& spec) {
  KvLayout l;
  const CacheGeometry g = CacheGeometryOf(spec);
  l.num_heads = g.heads;
  l.num_kv_heads = g.kv_heads;
  l.head_dim = g.head_dim;
  // One scale and soft-cap for all attention layers (every family that runs has them uniform;
  // LoadWeights refuses others). Recurrent layers hold state instead of keys and values.
  bool first = true;
  for (const LayerSpec& S : spec.layers) {
    if (S.HasRecurrentState()) l.recurrent_floats.push_back(S.RecurrentStateFloats());
    if (!S.HasKvCache()) continue;
    if (first) {
      l.scale = S.attn.scale;
      l.softcap = S.attn.logit_softcap;
      first = false;
    }
    ++l.num_layers;
    if (S.mixer == MixerKind::kMla) l.latent = true;
    l.window.push_back(S.attn.window);
  }
  return l;
}

}  // namespace tq
