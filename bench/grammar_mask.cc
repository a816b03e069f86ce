// The cost of constrained decoding (server/constrained_sampler.h) next to a decode step:
// - BM_MaskCold/vocab: one token mask computed from scratch (a cache miss), for the state inside
//   a JSON string (nearly every token allowed: the slowest walk) over the real 8192-token
//   vocabulary of tq-llama-21m (vocab=0) or a synthetic 131072-token one (vocab=1: the real
//   tokens plus random concatenations of two, to stand in for a Qwen/Llama-3-sized vocabulary).
// - BM_Sample/streams/vocab/constrained: one sampling step for each of `streams` sequences on
//   random logits (temperature 1: the unconstrained draw is almost never valid JSON, so nearly
//   every step takes the masked path), with a JSON-schema grammar shared by all streams
//   (constrained=1) or plain sampling (0). Per-token cost = time / streams.
// - BM_DecodeStep/rows: Model::DecodeBatch of tq-llama-21m for `rows` sequences (the step the
//   above runs next to), caches of 64 positions.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/grammar/json_schema.h"
#include "server/constrained_sampler.h"
#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string ModelDir() {
  const char* s = std::getenv("TQ_SHARED_DIR");
  return std::string(s && *s ? s : TQ_DEFAULT_SHARED_DIR) + "/models/tq-llama-21m";
}

const char* kSchema = R"({"type": "object", "properties": {"name": {"type": "string"},
    "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
    "kind": {"enum": ["cat", "dog"]}}, "required": ["name", "age", "kind"]})";

std::shared_ptr<tq::grammar::Vocabulary> Vocab(int which) {
  static auto tok = tq::Tokenizer::Load(ModelDir());
  static std::shared_ptr<tq::grammar::Vocabulary> v[2];
  if (!v[which]) {
    std::vector<std::string> bytes;
    std::vector<bool> special;
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      const int32_t one[1] = {id};
      bytes.push_back(tok->Decode(one, false));
      special.push_back(tok->IsSpecial(id));
    }
    if (which == 1) {
      std::mt19937 rng(1);
      const size_t n = bytes.size();
      while (bytes.size() < 131072) {
        bytes.push_back(bytes[3 + rng() % (n - 3)] + bytes[3 + rng() % (n - 3)]);
        special.push_back(false);
      }
    }
    v[which] = std::make_shared<tq::grammar::Vocabulary>(bytes, special);
  }
  return v[which];
}

std::shared_ptr<const tq::grammar::Grammar> SchemaGrammar() {
  static auto g = std::make_shared<const tq::grammar::Grammar>(
      tq::grammar::SchemaGrammar(nlohmann::ordered_json::parse(kSchema)));
  return g;
}

void BM_MaskCold(benchmark::State& state) {
  auto vocab = Vocab(int(state.range(0)));
  auto g = SchemaGrammar();
  // Inside the "name" string: {"name": "ab
  const tq::grammar::GrammarState in_string =
      tq::grammar::GrammarState::Start(*g).Advance(*g, std::string("{\"name\": \"ab"));
  for (auto _ : state) {
    tq::grammar::TokenMasker m(g, vocab);  // empty cache: every Mask is a miss
    benchmark::DoNotOptimize(m.Mask(in_string));
  }
  state.counters["vocab"] = double(vocab->size());
}

// A fake TextModel over a Vocabulary (what ConstrainedSampler's masker needs).
void BM_Sample(benchmark::State& state) {
  const int streams = int(state.range(0));
  auto vocab = Vocab(int(state.range(1)));
  const bool constrained = state.range(2) != 0;
  const int64_t v = vocab->size();
  auto masker = std::make_shared<tq::grammar::TokenMasker>(SchemaGrammar(), vocab);
  tq::SamplingParams p;
  p.temperature = 1.0f;
  const std::vector<int32_t> eos = {2};  // </s> of tq-llama-21m
  std::vector<std::unique_ptr<tq::TokenSampler>> samplers(static_cast<size_t>(streams));
  auto make = [&](int i) -> std::unique_ptr<tq::TokenSampler> {
    p.seed = uint64_t(i) * 7919 + 1;
    if (constrained)
      return std::make_unique<tq::server::ConstrainedSampler>(masker, p, v,
                                                              std::span<const int32_t>(), eos);
    return std::make_unique<tq::RuntimeSampler>(p, v, std::span<const int32_t>());
  };
  for (int i = 0; i < streams; ++i) samplers[size_t(i)] = make(i);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> base(static_cast<size_t>(v));
  for (float& x : base) x = nd(rng);
  std::vector<float> logits(static_cast<size_t>(v));
  int64_t tokens = 0, restarts = 0;
  int offset = 0;
  for (auto _ : state) {
    for (int i = 0; i < streams; ++i) {
      // Different logits per stream and step without regenerating: rotate the base row.
      offset = (offset + 7919) % int(v);
      std::copy(base.begin() + offset, base.end(), logits.begin());
      std::copy(base.begin(), base.begin() + offset, logits.begin() + (v - offset));
      const int32_t t = samplers[size_t(i)]->Sample(logits);
      ++tokens;
      if (t == eos[0]) {
        samplers[size_t(i)] = make(i + int(++restarts) * streams);
      }
    }
  }
  state.counters["us_per_token"] = benchmark::Counter(
      double(tokens) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const auto st = masker->stats();
  state.counters["mask_misses"] = double(st.misses);
  state.counters["mask_lookups"] = double(st.lookups);
}

void BM_DecodeStep(benchmark::State& state) {
  const int rows = int(state.range(0));
  static auto model = tq::Model::Load(ModelDir());
  std::vector<std::unique_ptr<tq::KvCache>> caches;
  std::vector<tq::KvCache*> ptrs;
  tq::KvCacheOptions o;
  o.max_tokens = 80;
  for (int i = 0; i < rows; ++i) {
    caches.push_back(model->NewCache(o));
    caches.back()->FillSynthetic(64, uint64_t(i + 1));
    ptrs.push_back(caches.back().get());
  }
  std::vector<int32_t> tokens(size_t(rows), 100);
  std::vector<float> logits(size_t(rows) * size_t(model->vocab_size()));
  for (auto _ : state) {
    model->DecodeBatch(tokens, ptrs, logits.data());
    for (auto* c : ptrs) c->Truncate(64);
  }
  state.counters["us_per_row"] =
      benchmark::Counter(double(rows) * 1e-6, benchmark::Counter::kIsIterationInvariantRate |
                                                  benchmark::Counter::kInvert);
}

BENCHMARK(BM_MaskCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sample)->ArgsProduct({{8, 32}, {0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeStep)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
