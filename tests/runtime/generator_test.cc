// The generation loop with the real tokenizers: stop strings across token boundaries, UTF-8
// streaming through byte tokens, eos and length limits, context limits; and greedy generation
// against the golden continuation of both reference models.
#include "runtime/generator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/chat.h"
#include "runtime/detokenizer.h"
#include "runtime/scheduler.h"
#include "runtime/text_sink.h"
#include "testutil/testutil.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {
namespace {

const char* kModels[] = {"tq-llama-21m", "tq-qwen3moe-17m"};

struct Streamed {
  std::string text;
  std::vector<std::string> pieces;  // what each token showed
  FinishReason reason = FinishReason::kNone;
};

// A "model" that writes `script`: the logits after the prompt and after each generated token are
// a one-hot on the script's next id (then on id 0), so greedy sampling generates the script.
class ScriptedEngine : public Engine {
 public:
  ScriptedEngine(int64_t vocab, std::span<const int32_t> script)
      : vocab_(vocab), script_(script.begin(), script.end()) {}
  int64_t vocab_size() const override { return vocab_; }
  int64_t context_length() const override { return 1 << 20; }
  int num_caches() const override { return 1; }
  int64_t kv_bytes_per_token() const override { return 0; }
  void Truncate(int, int64_t) override {}
  void Prefill(int, std::span<const int32_t>, float* logits) override { Next(logits); }
  void Decode(std::span<const int32_t> tokens, std::span<const int>, float* logits) override {
    for (size_t b = 0; b < tokens.size(); ++b) Next(logits + b * size_t(vocab_));
  }

 private:
  void Next(float* logits) {
    std::fill(logits, logits + vocab_, 0.0f);
    logits[next_ < script_.size() ? script_[next_] : 0] = 1.0f;
    ++next_;
  }
  int64_t vocab_;
  std::vector<int32_t> script_;
  size_t next_ = 0;
};

class RecordingTextSink : public TextSink {
 public:
  RecordingTextSink(const Tokenizer& tok, std::span<const int32_t> prompt,
                    const GenerateOptions& opts, Streamed* out)
      : TextSink([&tok](std::span<const int32_t> ids) { return tok.Decode(ids, true); }, opts.stop,
                 prompt),
        out_(out) {}
  bool Cancelled() const override { return false; }

 protected:
  bool OnText(int32_t, std::string_view text, const TokenLogprobs*) override {
    out_->pieces.emplace_back(text);
    out_->text += text;
    return true;
  }
  void OnEnd(FinishReason r, std::string_view tail, const SequenceStats&,
             const std::string&) override {
    out_->text += tail;
    out_->reason = r;
  }

 private:
  Streamed* out_;
};

// Runs the scheduler (as the Generator does: one slot, this thread) on a model that generates
// `ids`; the generation ends at the script's end ("length") unless something ends it sooner.
Streamed FeedTokens(const Tokenizer& tok, std::span<const int32_t> prompt,
                    std::span<const int32_t> ids, GenerateOptions opts,
                    std::vector<int32_t> eos = {}) {
  ScriptedEngine engine(tok.vocab_size(), ids);
  Scheduler sched(engine,
                  {.parallel = 1, .max_queue = 1, .prefill_chunk = 64, .own_thread = false});
  Streamed s;
  SequenceRequest req;
  req.prompt.assign(prompt.begin(), prompt.end());
  req.max_tokens = std::min<int64_t>(opts.max_tokens, int64_t(ids.size()));
  SamplingParams greedy;
  greedy.temperature = 0;
  req.sampler = std::make_unique<RuntimeSampler>(greedy, tok.vocab_size(), prompt);
  req.eos_tokens = std::move(eos);
  req.sink = std::make_shared<RecordingTextSink>(tok, prompt, opts, &s);
  std::vector<SequenceRequest> reqs;
  reqs.push_back(std::move(req));
  EXPECT_TRUE(sched.Submit(std::move(reqs)));
  sched.RunUntilIdle();
  return s;
}

TEST(Generation, StopStringAcrossTokensNeverShowsPart) {
  for (const char* name : kModels) {
    auto tok = Tokenizer::Load(test::ModelDir(name));
    const std::string text = "The dictionary says that a word is a unit of language and more.";
    const std::vector<int32_t> ids = tok->Encode(text, false);
    const std::string stop = "unit of lang";
    // The stop string must span several tokens for the test to mean anything: count token
    // boundaries that fall inside it.
    const std::string decoded = tok->Decode(ids);
    const size_t s0 = decoded.find(stop), s1 = s0 + stop.size();
    ASSERT_NE(s0, std::string::npos) << name;
    int inside = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      const size_t boundary = tok->Decode(std::span<const int32_t>(ids.data(), i)).size();
      if (boundary > s0 && boundary < s1) inside++;
    }
    ASSERT_GE(inside, 1) << name;
    GenerateOptions opts;
    opts.stop = {stop, "never matches"};
    const std::vector<int32_t> prompt = tok->Encode("Q:", true);
    Streamed s = FeedTokens(*tok, prompt, ids, opts);
    EXPECT_EQ(s.reason, FinishReason::kStop) << name;
    const std::string want = text.substr(0, text.find(stop));
    // Decoding may differ from the input only by the leading space rule; compare trimmed.
    auto trim = [](std::string x) { return x.erase(0, x.find_first_not_of(' ')); };
    EXPECT_EQ(trim(s.text), trim(want)) << name;
    // At every step the shown text is a prefix of the final text: nothing was taken back, so no
    // part of the stop string was ever shown.
    std::string shown;
    for (const auto& p : s.pieces) {
      shown += p;
      EXPECT_EQ(s.text.compare(0, shown.size(), shown), 0) << name << ": " << shown;
    }
  }
}

TEST(Generation, Utf8StreamingThroughByteTokens) {
  const std::string text = "naïve café — 日本語の辞書 €5 🙂 done";
  for (const char* name : kModels) {
    auto tok = Tokenizer::Load(test::ModelDir(name));
    const std::vector<int32_t> ids = tok->Encode(text, false);
    // Some single token must decode to broken UTF-8: a character split across tokens.
    int broken = 0;
    for (int32_t id : ids) {
      if (!IsCompleteUtf8(tok->Decode(std::span<const int32_t>(&id, 1)))) broken++;
    }
    ASSERT_GT(broken, 0) << name << ": no multi-byte character split across tokens";
    GenerateOptions opts;
    opts.max_tokens = 1000;
    const std::vector<int32_t> prompt = tok->Encode("Text:", true);
    Streamed s = FeedTokens(*tok, prompt, ids, opts);
    for (const auto& p : s.pieces) EXPECT_TRUE(IsCompleteUtf8(p)) << name << ": '" << p << "'";
    auto trim = [](std::string x) { return x.erase(0, x.find_first_not_of(' ')); };
    EXPECT_EQ(trim(s.text), trim(text)) << name;
  }
}

TEST(Generation, EosAndLengthLimits) {
  auto tok = Tokenizer::Load(test::ModelDir("tq-qwen3moe-17m"));
  const std::vector<int32_t> ids = tok->Encode("one two three four five", false);
  ASSERT_GE(ids.size(), 4u);
  const std::vector<int32_t> prompt = tok->Encode("x", false);
  GenerateOptions opts;
  opts.max_tokens = 3;
  Streamed s = FeedTokens(*tok, prompt, ids, opts);
  EXPECT_EQ(s.reason, FinishReason::kLength);
  EXPECT_EQ(s.text, tok->Decode(std::span<const int32_t>(ids.data(), 3), true));

  const int32_t eos = *tok->TokenToId("<|im_end|>");
  std::vector<int32_t> with_eos = {ids[0], ids[1], eos, ids[2]};
  opts.max_tokens = 100;
  s = FeedTokens(*tok, prompt, with_eos, opts, {eos});
  EXPECT_EQ(s.reason, FinishReason::kEos);
  EXPECT_EQ(s.text, tok->Decode(std::span<const int32_t>(ids.data(), 2), true));
}

TEST(Generation, ContextLimit) {
  std::vector<int32_t> prompt(100);
  for (int i = 0; i < 100; ++i) prompt[size_t(i)] = i;
  // Fits: the budget is clamped to the room left.
  auto p = prompt;
  EXPECT_EQ(FitToContext(&p, 50, 128, false), 28);
  EXPECT_EQ(FitToContext(&p, 10, 128, false), 10);
  // Too long: the error names both numbers.
  try {
    p = prompt;
    FitToContext(&p, 10, 64, false);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("100"), std::string::npos) << m;
    EXPECT_NE(m.find("64"), std::string::npos) << m;
  }
  // Truncation keeps the last tokens and leaves room for the generation.
  p = prompt;
  int64_t dropped = 0;
  EXPECT_EQ(FitToContext(&p, 10, 64, true, &dropped), 10);
  EXPECT_EQ(p.size(), 54u);
  EXPECT_EQ(dropped, 46);
  EXPECT_EQ(p.back(), 99);
  EXPECT_EQ(p.front(), 46);
  p = prompt;
  EXPECT_EQ(FitToContext(&p, 1000, 64, true), 32);  // half the context kept for the prompt
  EXPECT_EQ(p.size(), 32u);
}

TEST(Generation, ChatPromptMatchesReference) {
  for (const char* name : kModels) {
    const std::string dir = test::ModelDir(name);
    const auto ref = nlohmann::json::parse(ReadFileToString(dir + "/reference.json"));
    const TokenizerConfig cfg = LoadTokenizerConfig(dir);
    EXPECT_EQ(RenderChatPrompt(cfg, ref["chat_messages"]), ref["chat_rendered"].get<std::string>())
        << name;
  }
}

TEST(Generation, GreedyReproducesGoldenContinuation) {
  for (const char* name : kModels) {
    const std::string dir = test::ModelDir(name);
    auto golden = SafetensorsFile::Open(dir + "/golden.safetensors");
    const TensorView in = golden->View("input_ids");
    const TensorView want = golden->View("greedy_ids");
    std::vector<int32_t> prompt(in.as<int32_t>(), in.as<int32_t>() + in.numel());
    auto model = Model::Load(dir);
    auto tok = Tokenizer::Load(dir);
    KvCacheOptions kv;
    kv.dtype = KvDType::kF32;
    kv.max_tokens = int64_t(prompt.size()) + 16;
    auto cache = model->NewCache(kv);
    GenerateOptions opts;
    opts.max_tokens = 16;
    opts.sampling.temperature = 0.0f;
    Generator gen(*model, *tok, {});  // no eos: exactly 16 tokens
    std::string text;
    std::vector<int32_t> got;
    const GenerateStats st = gen.Generate(
        prompt, opts, *cache,
        [&](std::string_view t) {
          text += t;
          return true;
        },
        &got);
    EXPECT_EQ(st.generated_tokens, 16);
    EXPECT_EQ(st.finish, FinishReason::kLength);
    ASSERT_EQ(got.size(), 16u);
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(got[i], want.as<int32_t>()[i]) << name << " @" << i;
    EXPECT_EQ(text, tok->Decode(got, true)) << name;
  }
}

TEST(Generation, CancelStopsEarly) {
  const std::string dir = test::ModelDir("tq-llama-21m");
  auto model = Model::Load(dir);
  auto tok = Tokenizer::Load(dir);
  auto cache = model->NewCache(KvCacheOptions{64, KvDType::kF16});
  GenerateOptions opts;
  opts.max_tokens = 40;
  opts.sampling.temperature = 0.0f;
  Generator gen(*model, *tok, {});
  int calls = 0;
  const std::vector<int32_t> prompt = tok->Encode("The word", true);
  const GenerateStats st =
      gen.Generate(prompt, opts, *cache, [&](std::string_view) { return ++calls < 3; });
  EXPECT_EQ(st.finish, FinishReason::kCancelled);
  EXPECT_EQ(calls, 3);
  // A cache smaller than prompt + budget ends the generation at "length" instead of overflowing:
  // the context counts prompt + generated tokens, as the server's does.
  auto small = model->NewCache(KvCacheOptions{int64_t(prompt.size()) + 4, KvDType::kF16});
  const GenerateStats st2 = gen.Generate(prompt, opts, *small, nullptr);
  EXPECT_EQ(st2.finish, FinishReason::kLength);
  EXPECT_EQ(st2.generated_tokens, 4);
}

}  // namespace
}  // namespace tq
