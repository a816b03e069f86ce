// Sliding-window models with caches that keep only the window (kv_cache.h): logits equal those of
// a cache that stores every position and masks (1e-5), over a prompt several windows long run in
// chunks smaller and larger than the window, then greedy decode across several more wraps; also
// equal to the naive decoder, and through DecodeBatch with caches at different positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "model/model.h"
#include "synthetic_model.h"
#include "testutil/testutil.h"

namespace tq {
namespace test {
// gtest names a failing parameter by this instead of its bytes.
void PrintTo(const SynthSpec& s, std::ostream* os) {
  *os << s.model_type << " window " << s.sliding_window;
}
}  // namespace test
namespace {

using test::SynthSpec;

constexpr int64_t kPrompt = 48, kDecode = 30, kContext = 128;

std::vector<int32_t> Prompt(int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < kPrompt; ++i) t.push_back(int32_t((i * 29 + 5) % vocab));
  return t;
}

int32_t ArgMax(const float* x, int64_t n) { return int32_t(std::max_element(x, x + n) - x); }

// Prompt logits [kPrompt, vocab] (run through Forward, which chunks by the cache's max_append),
// then the logits of kDecode greedy steps, appended.
std::vector<float> PromptThenDecode(Model& model, KvCache& cache) {
  const int64_t V = model.vocab_size();
  const std::vector<int32_t> prompt = Prompt(V);
  std::vector<float> out(size_t((kPrompt + kDecode) * V));
  model.Forward(prompt, cache, out.data(), /*all_logits=*/true);
  for (int64_t s = 0; s < kDecode; ++s) {
    const float* prev = out.data() + (kPrompt + s - 1) * V;
    const int32_t next = ArgMax(prev, V);
    model.Forward({&next, 1}, cache, out.data() + (kPrompt + s) * V);
  }
  return out;
}

class SlidingWindowModel : public ::testing::TestWithParam<SynthSpec> {};

TEST_P(SlidingWindowModel, RingCacheLogitsEqualFullCacheLogits) {
  const SynthSpec& spec = GetParam();
  test::TempDir dir;
  const test::TensorMap w = test::WriteSyntheticModel(spec, dir.path().string(), 3);
  auto model = Model::Load(dir.path().string());
  const int64_t V = spec.vocab;
  auto full =
      model->NewCache({.max_tokens = kContext, .dtype = KvDType::kF32, .max_append = kContext});
  const std::vector<float> want = PromptThenDecode(*model, *full);

  // The full cache agrees with the naive decoder on the prompt (the window mask is right).
  const auto naive = test::NaiveForward(spec, w, Prompt(V));
  double scale = 1, err = 0;
  for (double x : naive) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < naive.size(); ++i) err = std::max(err, std::fabs(want[i] - naive[i]));
  EXPECT_LT(err, 1e-4 * scale);

  // Chunks of 2 and 3 (smaller than the window 5), 5, 8 and 13 (larger).
  for (int64_t max_append : {2, 3, 5, 8, 13}) {
    auto ring =
        model->NewCache({.max_tokens = kContext, .dtype = KvDType::kF32, .max_append = max_append});
    const std::vector<float> got = PromptThenDecode(*model, *ring);
    double d = 0;
    for (size_t i = 0; i < got.size(); ++i) d = std::max(d, double(std::fabs(got[i] - want[i])));
    // Chunking changes only the order of float sums (the scalar kernels of the sanitizer build
    // land at ~1.0e-5 absolute on logits of scale `scale`); a lost position is orders larger.
    EXPECT_LT(d, 1e-5 * scale) << "max_append " << max_append;
    // The window layers stopped growing: less memory than every position of every layer.
    EXPECT_LT(ring->MemoryBytes(), full->MemoryBytes()) << "max_append " << max_append;
  }
}

TEST_P(SlidingWindowModel, DecodeBatchOverRingCachesAtDifferentPositions) {
  const SynthSpec& spec = GetParam();
  test::TempDir dir;
  test::WriteSyntheticModel(spec, dir.path().string(), 4);
  auto model = Model::Load(dir.path().string());
  const int64_t V = spec.vocab;
  const std::vector<int32_t> prompt = Prompt(V);
  std::vector<float> scratch(size_t(kPrompt * V));
  // Two sequences (prompts of 48 and 31 tokens) in ring caches, and their full-cache twins.
  std::vector<std::unique_ptr<KvCache>> ring, full;
  for (int64_t len : {kPrompt, int64_t(31)}) {
    ring.push_back(
        model->NewCache({.max_tokens = kContext, .dtype = KvDType::kF32, .max_append = 4}));
    full.push_back(
        model->NewCache({.max_tokens = kContext, .dtype = KvDType::kF32, .max_append = kContext}));
    const std::span<const int32_t> p(prompt.data(), size_t(len));
    model->Forward(p, *ring.back(), scratch.data());
    model->Forward(p, *full.back(), scratch.data());
  }
  std::vector<float> a(size_t(2 * V)), b(size_t(2 * V));
  std::vector<int32_t> next = {1, 2};
  for (int s = 0; s < 20; ++s) {
    KvCache* rc[] = {ring[0].get(), ring[1].get()};
    KvCache* fc[] = {full[0].get(), full[1].get()};
    model->DecodeBatch(next, rc, a.data());
    model->DecodeBatch(next, fc, b.data());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << "step " << s;
    next = {ArgMax(a.data(), V), ArgMax(a.data() + V, V)};
  }
}

SynthSpec Mistral() {
  SynthSpec s;
  s.model_type = "mistral";
  s.sliding_window = 5;
  s.max_position_embeddings = kContext;
  return s;
}

SynthSpec Qwen2Mixed() {
  SynthSpec s;
  s.model_type = "qwen2";
  s.layers = 3;
  s.sliding_window = 5;
  s.max_window_layers = 1;  // layer 0 full attention, layers 1-2 windowed
  s.max_position_embeddings = kContext;
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, SlidingWindowModel, ::testing::Values(Mistral(), Qwen2Mixed()),
                         [](const auto& info) {
                           return info.param.model_type == "mistral" ? std::string("mistral")
                                                                     : std::string("qwen2_mixed");
                         });

}  // namespace
}  // namespace tq
