// Guards the quality table (docs/BENCHMARKS.md "Weight quantization"): tq-llama-21m converted with
// the plain method at 4 and 2 bits (g64, RMS scales, 8-bit embeddings), perplexity on the first
// 4,096 tokens of eval_brown against the bf16 model on the same tokens. The recorded bounds are the
// measured increases plus a margin for rotation-seed noise; a broken quantizer, packing, rotation
// or kernel lands far outside them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"

namespace tq {
namespace {

// The first 4,096 tokens of eval_brown in the tokenizer of model `src`.
std::vector<int32_t> BrownSlice(const std::string& src) {
  const std::string text = ReadFileToString(test::RequireFile(test::EvalFile("eval_brown.txt")));
  std::vector<int32_t> ids = Tokenizer::Load(src)->Encode(text, /*add_special_tokens=*/false);
  ids.resize(4096);
  return ids;
}

double SlicePerplexity(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = Model::Load(dir);
  PerplexityOptions o;
  o.max_tokens = 4096;
  o.kv.dtype = KvDType::kF32;
  o.progress = false;
  return ComputePerplexity(*model, ids, o).ppl;
}

TEST(QualityGuard, LlamaPlainMethodOnABrownSlice) {
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::vector<int32_t> ids = BrownSlice(src);
  const double base = SlicePerplexity(src, ids);
  test::TempDir tmp;
  struct Row {
    int bits;
    double lo, hi;  // bounds on the relative increase over bf16
  } rows[] = {{4, 0.002, 0.025}, {2, 0.15, 0.40}};
  for (const Row& r : rows) {
    const std::string out = tmp.file("q" + std::to_string(r.bits));
    Convert(test::Options(src, out, r.bits));
    const double inc = SlicePerplexity(out, ids) / base - 1;
    std::printf("bits %d: bf16 %.3f, +%.2f%%\n", r.bits, base, 100 * inc);
    EXPECT_GT(inc, r.lo) << r.bits << " bits";
    EXPECT_LT(inc, r.hi) << r.bits << " bits";
  }
}

// e8 group scales against fp16 scales at the same group (3-bit g32, MSE-search scales): one byte
// per group instead of two must cost nothing measurable (full protocol: +3.57 / +2.36% vs +3.62 /
// +2.34%, BENCHMARKS.md); a broken table, code choice or kernel path shows up as a gap.
TEST(QualityGuard, LlamaE8ScalesMatchFp16OnABrownSlice) {
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::vector<int32_t> ids = BrownSlice(src);
  const double base = SlicePerplexity(src, ids);
  test::TempDir tmp;
  double ppl[2];
  for (int e8 = 0; e8 < 2; ++e8) {
    ConvertOptions o = test::Options(src, tmp.file(e8 ? "e8" : "f16"), 3);
    o.recipe.group_size = 32;
    o.scale = quant::ScaleMode::kMseSearch;
    o.recipe.scale_format = e8 ? quant::ScaleFormat::kE8 : quant::ScaleFormat::kF16;
    Convert(o);
    ppl[e8] = SlicePerplexity(o.out_dir, ids);
    std::printf("3-bit g32 %s: bf16 %.3f, +%.2f%%\n", e8 ? "e8" : "f16", base,
                100 * (ppl[e8] / base - 1));
  }
  EXPECT_GT(ppl[1] / base - 1, 0.01);
  EXPECT_LT(ppl[1] / base - 1, 0.08);
  EXPECT_LT(std::abs(ppl[1] / ppl[0] - 1), 0.005);
}

}  // namespace
}  // namespace tq
