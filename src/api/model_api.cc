// turboquant::Model (include/turboquant/model.h) over the engine's Model, Tokenizer and
// Generator: the same steps `turboquant generate` and `perplexity` take, so the same options give
// the same tokens and numbers.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/api_errors.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/tqmlx_import.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/chat.h"
#include "runtime/generator.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "turboquant/model.h"

namespace turboquant {

using detail::Translate;

struct Model::Impl {
  std::unique_ptr<tq::Tokenizer> tokenizer;
  tq::TokenizerConfig tok_config;
  tq::GenerationConfig gen_config;
  std::unique_ptr<tq::Model> model;
  std::vector<int32_t> eos;
  int64_t context = 0;
  std::string source_format;
};

namespace {

tq::SamplingParams Sampling(const tq::GenerationConfig& gen, const GenerateOptions& o) {
  tq::SamplingParams s = tq::SamplingParamsFromConfig(gen);
  auto check = [](bool ok, const char* what, double v) {
    if (!ok) throw Error(Error::Kind::kUsage, fmt::format("[generate] {} (got {})", what, v));
  };
  if (o.temperature) {
    check(std::isfinite(*o.temperature) && *o.temperature >= 0,
          "temperature must be a finite number >= 0", *o.temperature);
    s.temperature = *o.temperature;
  }
  if (o.top_k) {
    check(*o.top_k >= 0, "top_k must be >= 0 (0 = off)", *o.top_k);
    s.top_k = *o.top_k;
  }
  if (o.top_p) {
    check(*o.top_p > 0 && *o.top_p <= 1, "top_p must be in (0, 1]", *o.top_p);
    s.top_p = *o.top_p;
  }
  if (o.min_p) {
    check(*o.min_p >= 0 && *o.min_p <= 1, "min_p must be in [0, 1]", *o.min_p);
    s.min_p = *o.min_p;
  }
  if (o.repetition_penalty) {
    check(std::isfinite(*o.repetition_penalty) && *o.repetition_penalty > 0,
          "repetition_penalty must be a finite number > 0", *o.repetition_penalty);
    s.repetition_penalty = *o.repetition_penalty;
  }
  s.seed = o.seed;
  return s;
}

nlohmann::ordered_json MessagesJson(const std::vector<Message>& messages) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const Message& m : messages) a.push_back({{"role", m.role}, {"content", m.content}});
  return a;
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::Load(const std::string& path, const LoadOptions& options) {
  return Translate([&] {
    if (options.device != "cpu")
      throw Error(Error::Kind::kUsage,
                  fmt::format("[turboquant load] device '{}' is not available in this build (cpu)",
                              options.device));
    if (options.threads < 0 || options.context < 0)
      throw Error(Error::Kind::kUsage, "[turboquant load] threads and context must be >= 0");
    if (options.threads > 0) tq::ThreadPool::SetGlobalThreads(options.threads);
    if (options.quiet) tq::tqmlx::SetNotice({});
    auto impl = std::make_unique<Impl>();
    impl->tokenizer = tq::Tokenizer::Load(path);
    impl->tok_config = tq::LoadTokenizerConfig(path);
    impl->gen_config = tq::LoadGenerationConfig(path);
    impl->model = tq::Model::Load(path);
    impl->eos = tq::CollectEosIds(impl->model->config(), impl->gen_config, *impl->tokenizer,
                                  impl->tok_config.eos_token);
    impl->context =
        options.context > 0 ? options.context : impl->model->config().max_position_embeddings;
    impl->source_format = tq::tqmlx::IsTqMlxDir(path) ? tq::tqmlx::kFormatName : "";
    return std::unique_ptr<Model>(new Model(std::move(impl)));
  });
}

std::vector<int32_t> Model::Tokenize(std::string_view text, bool add_special_tokens) const {
  return Translate([&] { return impl_->tokenizer->Encode(text, add_special_tokens); });
}

std::string Model::Detokenize(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return Translate([&] { return impl_->tokenizer->Decode(ids, skip_special_tokens); });
}

std::string Model::ApplyChatTemplate(const std::vector<Message>& messages,
                                     bool add_generation_prompt) const {
  return Translate([&] {
    return tq::RenderChatPrompt(impl_->tok_config, MessagesJson(messages), add_generation_prompt);
  });
}

GenerateResult Model::GenerateIds(std::span<const int32_t> prompt, const GenerateOptions& options,
                                  const TextCallback& on_text) {
  return Translate([&] {
    if (prompt.empty()) throw Error(Error::Kind::kUsage, "[generate] the prompt has no tokens");
    if (options.max_tokens <= 0)
      throw Error(Error::Kind::kUsage,
                  fmt::format("[generate] max_tokens must be > 0 (got {})", options.max_tokens));
    tq::GenerateOptions g;
    g.sampling = Sampling(impl_->gen_config, options);
    g.stop = options.stop;
    std::vector<int32_t> ids(prompt.begin(), prompt.end());
    g.max_tokens = tq::FitToContext(&ids, options.max_tokens, impl_->context, false);
    tq::KvCacheOptions kv;
    kv.max_tokens = int64_t(ids.size()) + g.max_tokens;
    auto cache = impl_->model->NewCache(kv);
    tq::Generator gen(*impl_->model, *impl_->tokenizer, impl_->eos);
    GenerateResult r;
    const tq::GenerateStats st = gen.Generate(
        ids, g, *cache,
        [&](std::string_view piece) {
          r.text.append(piece);
          return on_text ? on_text(piece) : true;
        },
        &r.tokens);
    r.finish_reason = tq::FinishReasonName(st.finish);
    r.prompt_tokens = st.prompt_tokens;
    r.prefill_tokens_per_second = st.prefill_tok_s();
    r.decode_tokens_per_second = st.decode_tok_s();
    return r;
  });
}

GenerateResult Model::Generate(std::string_view prompt, const GenerateOptions& options,
                               const TextCallback& on_text) {
  const std::vector<int32_t> ids = Tokenize(prompt, true);
  return GenerateIds(ids, options, on_text);
}

GenerateResult Model::Chat(const std::vector<Message>& messages, const GenerateOptions& options,
                           const TextCallback& on_text) {
  // The rendered template holds its special tokens: encode without adding them again.
  const std::vector<int32_t> ids = Tokenize(ApplyChatTemplate(messages, true), false);
  return GenerateIds(ids, options, on_text);
}

Score Model::ScoreText(std::string_view text) {
  return Translate([&] {
    Score s;
    s.tokens = impl_->tokenizer->Encode(text, false);
    const int64_t n = int64_t(s.tokens.size());
    if (n < 2) throw Error(Error::Kind::kUsage, "[score] the text needs at least 2 tokens");
    if (n > impl_->context)
      throw Error(Error::Kind::kUsage,
                  fmt::format("[score] {} tokens exceed the context of {}", n, impl_->context));
    tq::KvCacheOptions kv;
    kv.max_tokens = n;
    auto cache = impl_->model->NewCache(kv);
    const int64_t vocab = impl_->model->config().vocab_size;
    std::vector<float> logits(size_t(n * vocab));  // [n, vocab]
    impl_->model->Forward(s.tokens, *cache, logits.data(), /*all_logits=*/true);
    for (int64_t i = 0; i + 1 < n; ++i) {
      const double nll =
          tq::NegLogLikelihood(logits.data() + i * vocab, vocab, s.tokens[size_t(i + 1)]);
      s.logprobs.push_back(float(-nll));
      s.total -= nll;
    }
    return s;
  });
}

double Model::Perplexity(std::string_view text, int64_t ctx, int64_t max_tokens) {
  return Translate([&] {
    if (ctx < 2 || max_tokens < 2)
      throw Error(Error::Kind::kUsage, "[perplexity] ctx and max_tokens must be >= 2");
    const std::vector<int32_t> ids = impl_->tokenizer->Encode(text, false);
    tq::PerplexityOptions po;
    po.ctx = ctx;
    po.max_tokens = max_tokens;
    po.progress = false;
    return tq::ComputePerplexity(*impl_->model, ids, po).ppl;
  });
}

std::vector<float> Model::Logits(std::span<const int32_t> ids) {
  return Translate([&] {
    const int64_t n = int64_t(ids.size());
    if (n < 1 || n > impl_->context)
      throw Error(Error::Kind::kUsage,
                  fmt::format("[logits] {} ids (1 .. context {} allowed)", n, impl_->context));
    tq::KvCacheOptions kv;
    kv.max_tokens = n;
    auto cache = impl_->model->NewCache(kv);
    std::vector<float> logits(size_t(n * impl_->model->config().vocab_size));
    impl_->model->Forward(ids, *cache, logits.data(), /*all_logits=*/true);
    return logits;
  });
}

std::vector<float> Model::EmbedIds(std::span<const int32_t> ids, const EmbedOptions& options) {
  return Translate([&] {
    const int64_t n = int64_t(ids.size());
    if (n < 1 || n > impl_->context)
      throw Error(Error::Kind::kUsage,
                  fmt::format("[embed] {} tokens (1 .. context {} allowed)", n, impl_->context));
    const int64_t d = impl_->model->config().hidden_size;
    tq::KvCacheOptions kv;
    kv.max_tokens = n;
    auto cache = impl_->model->NewCache(kv);
    std::vector<float> h(size_t(n * d));  // [n, hidden]
    impl_->model->ForwardHidden(ids, *cache, h.data());
    std::vector<float> out;
    if (options.pooling == Pooling::kNone) {
      out = std::move(h);
    } else if (options.pooling == Pooling::kLast) {
      out.assign(h.end() - d, h.end());
    } else {
      std::vector<double> sum(size_t(d), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < d; ++j) sum[size_t(j)] += h[size_t(t * d + j)];
      out.resize(size_t(d));
      for (int64_t j = 0; j < d; ++j) out[size_t(j)] = float(sum[size_t(j)] / double(n));
    }
    if (options.normalize) {
      for (size_t r = 0; r < out.size(); r += size_t(d)) {
        double ss = 0;
        for (int64_t j = 0; j < d; ++j) ss += double(out[r + size_t(j)]) * out[r + size_t(j)];
        const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;  // a zero vector stays zero
        for (int64_t j = 0; j < d; ++j) out[r + size_t(j)] = float(out[r + size_t(j)] * inv);
      }
    }
    return out;
  });
}

std::vector<float> Model::Embed(std::string_view text, const EmbedOptions& options) {
  const std::vector<int32_t> ids = Tokenize(text, options.add_special_tokens);
  if (ids.empty()) throw Error(Error::Kind::kUsage, "[embed] the text has no tokens");
  return EmbedIds(ids, options);
}

int64_t Model::vocab_size() const { return impl_->model->config().vocab_size; }
int64_t Model::hidden_size() const { return impl_->model->config().hidden_size; }
int64_t Model::context() const { return impl_->context; }
const std::string& Model::architecture() const { return impl_->model->config().architecture; }
const std::string& Model::source_format() const { return impl_->source_format; }

}  // namespace turboquant
