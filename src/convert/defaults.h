// The defaults of `convert --bits B` (issue 23), shared with what `plan --bits B` projects, so a
// default file is no larger than llama.cpp's Q4_0 / Q3_K_S / Q2_K file of the same model and the
// bytes read per decoded token are not dominated by a bf16 embedding:
// - embedding / LM head at 8 bits (q8, fp16 scales): on tq-llama-21m quantizing only them to q8
//   moves perplexity by < 0.01% (docs/BENCHMARKS.md "Weight quantization"); q4 g32 costs +0.55 /
//   +0.40% on the first 16,384 tokens of eval_brown / eval_other (measured here, issue 18): too
//   much for the ≤ 0.45% targets. There is no 6-bit code (llama.cpp stores its output at Q6_K).
// - e8 group scales (one byte per group; docs/FORMAT.md) for the turboquant method: the same
//   quality as fp16 at a group size (noise, BENCHMARKS "e8 group scales"), 8/G bits cheaper.
// - group 128 at 4 and 8 bits, 64 at 2 and 3: at 4 bits g128 and g64 are equal within noise on
//   tq-llama-21m (+1.10 / +0.54% vs +1.11 / +0.49%, fp16 MSE) and only with g128 does the 1B /
//   8B shape fit under Q4_0 with an 8-bit embedding (Q4_0 is 4.5 bits, its output 6.56); at 2–3
//   bits the smaller group is worth its 0.06 bits (2-bit g128 +25.8% vs g64 +23.8%) and the file
//   is well below llama.cpp's Q3_K_S / Q2_K anyway.
#pragma once

#include "model/quant_recipe.h"

namespace tq {

// Which of the options the user gave (those keep their values).
struct GivenOptions {
  bool group_size = false;
  bool embed_bits = false;
  bool scale_format = false;
};

inline constexpr int kDefaultEmbedBits = 8;
int DefaultGroupSize(int bits);  // 128 for 4 and 8 bits, 64 for 2 and 3

// Fills the options the user did not give with the defaults above (budget modes choose groups
// themselves and use e8 by default too).
void ApplyConvertDefaults(QuantRecipeOptions& r, const GivenOptions& given);

}  // namespace tq
