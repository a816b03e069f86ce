#include "convert/defaults.h"

namespace tq {

int DefaultGroupSize(int bits) { return bits >= 4 ? 128 : 64; }

void ApplyConvertDefaults(QuantRecipeOptions& r, const GivenOptions& given) {
  if (!given.embed_bits) r.embed_bits = kDefaultEmbedBits;
  if (!given.group_size) r.group_size = DefaultGroupSize(r.bits);
  if (!given.scale_format)
    r.scale_format = r.method == quant::QuantMethod::kCodebook ? quant::ScaleFormat::kE8
                                                               : quant::ScaleFormat::kF16;
}

}  // namespace tq
