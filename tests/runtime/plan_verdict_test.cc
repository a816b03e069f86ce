// plan's parts and verdicts (runtime/plan/memory_plan.h), the report, and the `plan` verb's exit
// codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "kv/kv_cache_bytes.h"
#include "model/tensor_roles.h"
#include "runtime/plan/device_memory.h"
#include "runtime/plan/memory_plan.h"
#include "runtime/plan/plan_report.h"
#include "runtime/synth_shapes.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kMiB = 1 << 20;

PlanOptions Opts(const std::string& model, int64_t context, double ram_gb) {
  PlanOptions o;
  o.model_dir = test::ModelDir(model);
  o.context = context;
  o.ram_gb = ram_gb;
  o.threads = 2;
  return o;
}

TEST(PlanVerdict, PartsOfLlama) {
  const PlanOptions o = Opts("tq-llama-21m", 4096, 64);
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.checkpoint_kind, "hf");
  EXPECT_EQ(p.verdict, PlanVerdict::kFits);
  // Tied embeddings: every stored tensor is read, and nothing is a row-resident lookup table.
  EXPECT_EQ(p.file_bytes, p.weights_bytes);
  EXPECT_EQ(p.memory.weights, int64_t(Checkpoint::Open(o.model_dir)->TotalBytes()));
  EXPECT_EQ(p.lookup_table_bytes, 0);
  // fp16 KV: 2 (k, v) x 6 layers x 2 kv heads x 64 x 2 bytes per token.
  EXPECT_EQ(p.kv_bytes_per_token, 2 * 6 * 2 * 64 * 2);
  EXPECT_EQ(p.memory.kv, 4096 * p.kv_bytes_per_token);
  EXPECT_EQ(p.kv_sliding_layers, 0);
  // Workspace grows with the prefill step, KV with the context, and nothing else changes.
  const MemoryBreakdown small = PlanMemoryAt(p, o, 1024, 64);
  EXPECT_LT(small.workspace, p.memory.workspace);
  EXPECT_EQ(small.kv * 4, p.memory.kv);
  EXPECT_EQ(small.weights, p.memory.weights);
  // Beyond the model's chunk (512 rows) the workspace stays the same.
  EXPECT_EQ(PlanMemoryAt(p, o, 4096, 4096).workspace, PlanMemoryAt(p, o, 4096, 512).workspace);
  EXPECT_EQ(p.usable_bytes, int64_t(64) << 30);
  EXPECT_EQ(p.headroom_bytes, p.usable_bytes - p.memory.peak());
}

TEST(PlanVerdict, KvBytesFollowTheCacheDType) {
  PlanOptions o = Opts("tq-llama-21m", 1000, 64);
  o.kv.dtype = KvDType::kF32;
  EXPECT_EQ(MakeMemoryPlan(o).kv_bytes_per_token, 2 * 6 * 2 * 64 * 4);
  KvLayout l;
  l.num_layers = 3;
  l.num_heads = 4;
  l.num_kv_heads = 2;
  l.head_dim = 32;
  EXPECT_EQ(KvCacheBytes(l, {}, 10), 10 * 2 * 3 * 2 * 32 * 2);
  EXPECT_EQ(KvCacheBytes(l, {}, 0), 0);
  EXPECT_THROW(KvCacheBytes(l, {}, -1), Error);
}

TEST(PlanVerdict, FitsOnlySmallerSaysWhatFits) {
  PlanOptions o = Opts("tq-llama-21m", 16384, 1);
  const MemoryPlan big = MakeMemoryPlan(o);
  // Give it 8 MiB less than it needs: a smaller context or prefill step fits.
  o.ram_gb = double(big.memory.peak() - 8 * kMiB) / double(int64_t(1) << 30);
  const MemoryPlan p = MakeMemoryPlan(o);
  ASSERT_EQ(p.verdict, PlanVerdict::kFitsSmaller);
  ASSERT_GT(p.max_context, 0);
  EXPECT_LE(PlanMemoryAt(p, o, p.max_context, o.prefill_step).peak(), p.usable_bytes);
  EXPECT_GT(PlanMemoryAt(p, o, p.max_context + 1, o.prefill_step).peak(), p.usable_bytes);
  ASSERT_GT(p.max_prefill_step, 0);
  EXPECT_LE(PlanMemoryAt(p, o, o.context, p.max_prefill_step).peak(), p.usable_bytes);
  EXPECT_GT(PlanMemoryAt(p, o, o.context, p.max_prefill_step + 1).peak(), p.usable_bytes);
  const std::string line = VerdictLine(p);
  EXPECT_NE(line.find("--context " + std::to_string(p.max_context)), std::string::npos) << line;
  EXPECT_NE(line.find("--prefill-step " + std::to_string(p.max_prefill_step)), std::string::npos);
  // Far too little: nothing fits.
  o.ram_gb = 0.01;
  const MemoryPlan none = MakeMemoryPlan(o);
  EXPECT_EQ(none.verdict, PlanVerdict::kDoesNotFit);
  EXPECT_NE(VerdictLine(none).find("does not fit"), std::string::npos);
}

TEST(PlanVerdict, MoeExpertStreaming) {
  PlanOptions o = Opts("tq-qwen3moe-17m", 4096, 1);
  const MemoryPlan full = MakeMemoryPlan(o);
  EXPECT_TRUE(full.moe);
  EXPECT_EQ(full.verdict, PlanVerdict::kFits);
  EXPECT_GT(full.expert_bytes, full.weights_bytes / 2);  // 32 experts x 6 layers dominate
  // It fits: the recommendation is every expert (whole slots).
  EXPECT_LE(full.streaming_cache_bytes, full.expert_bytes);
  EXPECT_GT(full.streaming_cache_bytes, full.expert_bytes - full.streaming_expert_bytes);
  EXPECT_LT(full.expert_bytes - full.streaming_expert_bytes * 6 * 32, 6 * 32);
  EXPECT_EQ(full.streaming_min_cache_bytes, 4 * 6 * full.streaming_expert_bytes);  // top-4
  // Half the experts short: only streaming fits, with a cache between one token's experts and
  // all of them, leaving 10% of the usable memory free.
  o.ram_gb = double(full.memory.peak() - full.expert_bytes / 2) / double(int64_t(1) << 30);
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_NE(p.verdict, PlanVerdict::kFits);
  EXPECT_TRUE(p.streaming_fits);
  EXPECT_LT(p.streaming_cache_bytes, p.expert_bytes);
  EXPECT_GE(p.streaming_cache_bytes, p.streaming_min_cache_bytes);
  EXPECT_LE(p.streaming_peak_bytes, p.usable_bytes - p.usable_bytes / 10);
  EXPECT_GT(p.streaming_resident_fraction, 0.0);
  EXPECT_LT(p.streaming_resident_fraction, 1.0);
  EXPECT_GT(p.streaming_miss_bytes_per_token, 0);
  const std::string line = VerdictLine(p);
  EXPECT_NE(line.find("expert streaming (--expert-cache "), std::string::npos) << line;
  EXPECT_NE(line.find("% of experts resident"), std::string::npos) << line;
  const auto j = PlanToJson(p);
  EXPECT_TRUE(j["expert_streaming"]["fits"].get<bool>());
  EXPECT_EQ(j["expert_streaming"]["cache_bytes"].get<int64_t>(), p.streaming_cache_bytes);
  // Far too little for even one token's experts: the minimum, and it does not fit.
  o.ram_gb = 0.001;
  const MemoryPlan none = MakeMemoryPlan(o);
  EXPECT_EQ(none.streaming_cache_bytes, none.streaming_min_cache_bytes);
  EXPECT_FALSE(none.streaming_fits);
}

TEST(PlanVerdict, ProjectedConversionAndJson) {
  PlanOptions o = Opts("tq-llama-21m", 2048, 64);
  const MemoryPlan stored = MakeMemoryPlan(o);
  o.recipe = QuantRecipeOptions{};
  o.recipe->bits = 3;
  const MemoryPlan q3 = MakeMemoryPlan(o);
  EXPECT_LT(q3.weights_bytes, stored.weights_bytes / 2);
  EXPECT_NE(q3.weights_source.find("3-bit"), std::string::npos);
  EXPECT_EQ(q3.memory.kv, stored.memory.kv);
  const auto j = PlanToJson(q3);
  for (const char* key :
       {"weights_bytes", "kv_bytes", "kv_bytes_per_token", "workspace_bytes", "reserve_bytes",
        "peak_bytes", "usable_bytes", "headroom_bytes", "verdict", "max_context"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["verdict"], "fits");
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), q3.memory.peak());
  EXPECT_NE(PlanToText(q3).find("verdict"), std::string::npos);
}

TEST(PlanVerdict, TurboQuantCheckpointAndErrors) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file("tq");
  fs::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg["quantization"] = {{"mode", "turboquant"}, {"format_version", 1}};
  test::WriteFile(dir + "/config.json", cfg.dump());
  fs::create_symlink(src + "/model.safetensors", dir + "/model.safetensors");
  PlanOptions o = Opts("tq-llama-21m", 1024, 64);
  o.model_dir = dir;
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.checkpoint_kind, "turboquant");
  o.recipe = QuantRecipeOptions{};
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);

  o = Opts("tq-llama-21m", -1, 64);  // 0 is the model's default context
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);
  o = Opts("tq-llama-21m", 64, 64);
  o.prefill_step = 0;
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);
  o = Opts("tq-llama-21m", 64, 64);
  o.model_dir = tmp.file("missing");
  try {
    MakeMemoryPlan(o);
    ADD_FAILURE() << "planned a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  // Weights missing: names the directory.
  fs::remove(dir + "/model.safetensors");
  o.model_dir = dir;
  EXPECT_THROW(MakeMemoryPlan(o), Error);
}

// A copy of tq-llama-21m's config (weights linked) as another model type.
std::string Relabel(const test::TempDir& tmp, const std::string& name,
                    const nlohmann::json& changes) {
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = tmp.file(name);
  fs::create_directory(dir);
  auto cfg = nlohmann::json::parse(ReadFileToString(src + "/config.json"));
  cfg.update(changes);
  test::WriteFile(dir + "/config.json", cfg.dump());
  fs::create_symlink(src + "/model.safetensors", dir + "/model.safetensors");
  return dir;
}

TEST(PlanVerdict, SlidingWindowLayersAreCappedAtTheWindow) {
  test::TempDir tmp;
  PlanOptions o = Opts("tq-llama-21m", 4096, 64);
  o.model_dir = Relabel(tmp, "mistral",
                        {{"model_type", "mistral"},
                         {"architectures", {"MistralForCausalLM"}},
                         {"sliding_window", 256}});
  const MemoryPlan p = MakeMemoryPlan(o);
  const int64_t position = 2 * 2 * 64 * 2;  // k + v, 2 kv heads, head_dim 64, fp16: one layer
  EXPECT_EQ(p.kv_sliding_layers, 6);
  EXPECT_EQ(p.kv_full_layers, 0);
  EXPECT_EQ(p.sliding_window, 256);
  // Window + one prefill chunk of the runtime (512): kv_cache.h's rule, the cache's own bytes.
  EXPECT_EQ(p.kv_sliding_positions, 256 + 512);
  EXPECT_EQ(p.memory.kv, 6 * 768 * position);
  EXPECT_EQ(p.memory.kv, KvCacheBytes(KvLayoutForConfig(p.config), o.kv, 4096));
  EXPECT_EQ(p.kv_sliding_bytes, p.memory.kv);
  // Stops growing past the window; below window + chunk every position is held.
  EXPECT_EQ(PlanMemoryAt(p, o, 1 << 20, 512).kv, p.memory.kv);
  EXPECT_EQ(PlanMemoryAt(p, o, 500, 512).kv, 6 * 500 * position);
  for (const auto& n : p.notes) EXPECT_EQ(n.find("sliding"), std::string::npos) << n;
  EXPECT_NE(PlanToText(p).find("6 sliding-window layers (window 256) keep 768 positions each"),
            std::string::npos)
      << PlanToText(p);
  const auto j = PlanToJson(p);
  EXPECT_EQ(j["kv_sliding_positions"], 768);
  EXPECT_EQ(j["kv_full_layers"], 0);
  EXPECT_EQ(j["kv_sliding_bytes"], p.memory.kv);

  // qwen2 with use_sliding_window: layers from max_window_layers on slide; the rest hold all.
  o.model_dir = Relabel(tmp, "qwen2",
                        {{"model_type", "qwen2"},
                         {"architectures", {"Qwen2ForCausalLM"}},
                         {"use_sliding_window", true},
                         {"sliding_window", 1024},
                         {"max_window_layers", 2}});
  o.context = 32768;
  const MemoryPlan q = MakeMemoryPlan(o);
  EXPECT_EQ(q.kv_full_layers, 2);
  EXPECT_EQ(q.kv_sliding_layers, 4);
  EXPECT_EQ(q.kv_sliding_positions, 1024 + 512);
  EXPECT_EQ(q.kv_full_bytes, 2 * 32768 * position);
  EXPECT_EQ(q.kv_sliding_bytes, 4 * 1536 * position);
  EXPECT_EQ(q.memory.kv, q.kv_full_bytes + q.kv_sliding_bytes);
  EXPECT_NE(PlanToText(q).find("2 full-attention layers"), std::string::npos) << PlanToText(q);
  // With a compressed cache the sliding-window layers stay plain (and capped).
  o.kv.k_bits = o.kv.v_bits = 4;
  const MemoryPlan c = MakeMemoryPlan(o);
  EXPECT_EQ(c.kv_sliding_bytes, q.kv_sliding_bytes);
  EXPECT_LT(c.kv_full_bytes, q.kv_full_bytes / 3);
}

// Decoder linear weights of tq-llama-21m: 6 layers x (q, o 512x512; k, v 128x512; gate, up,
// down 1408x512).
constexpr int64_t kLlamaLinearWeights = 6 * (2 * 512 * 512 + 2 * 128 * 512 + 3 * 1408 * 512);

TEST(PlanVerdict, BudgetBpwIsAnUpperBound) {
  PlanOptions o = Opts("tq-llama-21m", 1024, 64);
  o.recipe = QuantRecipeOptions{};  // 4-bit g64
  const MemoryPlan four = MakeMemoryPlan(o);
  auto at = [&](double x) {
    PlanOptions b = o;
    b.budget_bpw = x;
    return MakeMemoryPlan(b);
  };
  const MemoryPlan b3 = at(3.0), b35 = at(3.5);
  // The linears at X bits per weight: the bound moves by exactly dX * weights / 8.
  EXPECT_NEAR(double(b35.weights_bytes - b3.weights_bytes), 0.5 * kLlamaLinearWeights / 8, 1.0);
  EXPECT_LT(b3.weights_bytes, b35.weights_bytes);
  EXPECT_LT(b35.weights_bytes, four.weights_bytes);  // 4-bit g64 is 4.25 bits per weight
  EXPECT_EQ(b3.budget_bpw, 3.0);
  EXPECT_EQ(b3.budget_linear_bytes_before, at(4.25).budget_linear_bytes_before);
  // Everything else is as the recipe projects it.
  EXPECT_EQ(b3.weights_bytes - b3.budget_linear_bytes_bound,
            four.weights_bytes - b3.budget_linear_bytes_before);
  // Above what 8-bit codes in groups of 32 cost, more budget buys nothing.
  EXPECT_EQ(at(9.0).weights_bytes, at(20.0).weights_bytes);
  EXPECT_NE(b3.weights_source.find("upper bound"), std::string::npos);
  EXPECT_NE(PlanToText(b3).find("upper bound"), std::string::npos);
  const auto j = PlanToJson(b3);
  EXPECT_EQ(j["budget"]["bpw"], 3.0);
  EXPECT_EQ(j["budget"]["upper_bound"], true);
  EXPECT_TRUE(PlanToJson(four)["budget"].is_null());
  // Like convert: below the cheapest reachable average (2-bit codes, g128: 2.125), below 1.6,
  // without a projected conversion, or with the affine method.
  EXPECT_THROW(at(1.7), UsageError);
  EXPECT_THROW(at(1.0), UsageError);
  PlanOptions none = Opts("tq-llama-21m", 1024, 64);
  none.budget_bpw = 3.0;
  EXPECT_THROW(MakeMemoryPlan(none), UsageError);
  o.recipe->method = quant::QuantMethod::kAffine;
  EXPECT_THROW(at(3.0), UsageError);
}

// A checkpoint of a real model's shapes whose data section is a hole in a sparse file: plan reads
// headers only, so it plans a 16 GB model in milliseconds with no disk used.
std::string SparseCheckpoint(const test::TempDir& tmp, const std::string& name,
                             const nlohmann::json& cfg) {
  const std::string dir = tmp.file(name);
  fs::create_directory(dir);
  test::WriteFile(dir + "/config.json", cfg.dump());
  const ModelConfig c = ParseModelConfig(cfg.dump(), name);
  nlohmann::json header;  // (ordered_json inserts in linear time: slow for 18k tensors)
  uint64_t offset = 0;
  for (const ExpectedTensor& e : ExpectedTensors(c)) {
    if (e.role == TensorRole::kLmHead && c.tie_word_embeddings) continue;
    const uint64_t bytes = uint64_t(NumElements(e.shape)) * 2;
    header[e.name] = {
        {"dtype", "BF16"}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((n >> (8 * i)) & 0xff);
  test::WriteFile(dir + "/model.safetensors", file + h);
  fs::resize_file(dir + "/model.safetensors", 8 + n + offset);
  return dir;
}

TEST(PlanVerdict, RealScaleFromHeadersOnly) {
  test::TempDir tmp;
  const nlohmann::json llama8b = {{"architectures", {"LlamaForCausalLM"}},
                                  {"model_type", "llama"},
                                  {"vocab_size", 128256},
                                  {"hidden_size", 4096},
                                  {"intermediate_size", 14336},
                                  {"num_hidden_layers", 32},
                                  {"num_attention_heads", 32},
                                  {"num_key_value_heads", 8},
                                  {"max_position_embeddings", 131072},
                                  {"rope_theta", 500000.0},
                                  {"tie_word_embeddings", false},
                                  {"torch_dtype", "bfloat16"}};
  PlanOptions o;
  o.model_dir = SparseCheckpoint(tmp, "llama8b", llama8b);
  o.context = 32768;
  o.ram_gb = 16;
  o.threads = 16;
  const MemoryPlan bf16 = MakeMemoryPlan(o);
  EXPECT_EQ(bf16.file_bytes, int64_t(8030261248) * 2);               // 8.03B parameters in bf16
  EXPECT_EQ(bf16.memory.kv, int64_t(32768) * 32 * 2 * 8 * 128 * 2);  // 4 GiB fp16
  EXPECT_EQ(bf16.lookup_table_bytes, int64_t(128256) * 4096 * 2);    // untied: resident by row
  EXPECT_NE(bf16.verdict, PlanVerdict::kFits);
  o.recipe = QuantRecipeOptions{};  // 4-bit TurboQuant
  const MemoryPlan q4 = MakeMemoryPlan(o);
  EXPECT_EQ(q4.verdict, PlanVerdict::kFits);
  // ~4.27 bits per linear weight; embeddings and the head stay bf16.
  const int64_t linears = int64_t(8030261248) - 2 * int64_t(128256) * 4096 - 65 * 4096;
  const int64_t head = int64_t(128256) * 4096 * 2;
  EXPECT_NEAR(double(q4.weights_bytes - 2 * head) / double(linears), 4.27 / 8, 0.01);

  const nlohmann::json qwen30b = {{"architectures", {"Qwen3MoeForCausalLM"}},
                                  {"model_type", "qwen3_moe"},
                                  {"vocab_size", 151936},
                                  {"hidden_size", 2048},
                                  {"intermediate_size", 6144},
                                  {"moe_intermediate_size", 768},
                                  {"num_hidden_layers", 48},
                                  {"num_attention_heads", 32},
                                  {"num_key_value_heads", 4},
                                  {"head_dim", 128},
                                  {"num_experts", 128},
                                  {"num_experts_per_tok", 8},
                                  {"norm_topk_prob", true},
                                  {"max_position_embeddings", 40960},
                                  {"tie_word_embeddings", false},
                                  {"torch_dtype", "bfloat16"}};
  o.model_dir = SparseCheckpoint(tmp, "qwen3-30b-a3b", qwen30b);
  o.context = 16384;
  o.ram_gb = 12;
  o.recipe->bits = 3;
  const MemoryPlan moe = MakeMemoryPlan(o);
  EXPECT_EQ(moe.verdict, PlanVerdict::kDoesNotFit);
  EXPECT_TRUE(moe.moe);
  EXPECT_GT(moe.expert_bytes, moe.weights_bytes * 8 / 10);  // bf16 embedding + head: the rest
  EXPECT_TRUE(moe.streaming_fits) << VerdictLine(moe);
}

TEST(PlanVerdict, GptOss120bAsConverted) {
  // openai/gpt-oss-120b's shapes as published in bf16 (fused [E, ...] experts): plan --bits 4
  // projects the experts as convert writes them, one packed linear each. Per [2880, 2880]
  // projection: q4 codes, e8 scales of groups of 64 (2880's Hadamard block), the codebook and
  // the bf16 bias; per layer two sign vectors and two e8 tables (gate/up and down).
  test::TempDir tmp;
  PlanOptions o;
  o.model_dir =
      SparseCheckpoint(tmp, "gpt-oss-120b", SynthConfigJson(FindSynthShape("gpt-oss-120b"), 0));
  o.context = 16384;
  o.ram_gb = 80;
  o.threads = 16;
  QuantRecipeOptions r;
  r.bits = 4;
  r.group_size = 128;
  r.scale_format = quant::ScaleFormat::kE8;
  r.embed_bits = 8;
  o.recipe = r;
  const MemoryPlan p = MakeMemoryPlan(o);
  const int64_t projection = 2880 * 1440 + 2880 * 45 + 16 * 4 + 2880 * 2;
  EXPECT_EQ(p.expert_bytes, int64_t(36) * 128 * 3 * projection + 36 * 2 * (360 + 1024));
  EXPECT_EQ(p.unused_bytes, 0);
  EXPECT_EQ(p.verdict, PlanVerdict::kFits) << VerdictLine(p);  // ~61 GB of weights in 80
  o.ram_gb = 40;
  const MemoryPlan small = MakeMemoryPlan(o);
  EXPECT_EQ(small.verdict, PlanVerdict::kDoesNotFit);
  EXPECT_TRUE(small.streaming_fits) << VerdictLine(small);
}

TEST(PlanVerdict, CudaCountsDeviceMemoryOnly) {
  PlanOptions o = Opts("tq-llama-21m", 1024, 80);
  o.device = PlanDevice::kCuda;  // with --ram-gb: no device query
  const MemoryPlan p = MakeMemoryPlan(o);
  EXPECT_EQ(p.device, "cuda");
  EXPECT_EQ(p.reserve_tokenizer, 0);
  // The CUDA context, cuBLAS's workspace, a dequantized weight chunk and a 512-row prompt chunk's
  // x as two bf16 copies (the widest input: intermediate_size 1408).
  const int64_t device = 512 * kMiB + 32 * kMiB + 128 * kMiB + 2 * 512 * 1408 * 2;
  EXPECT_EQ(p.reserve_device, device);
  EXPECT_EQ(p.memory.reserve, device);
}

TEST(PlanVerdict, CudaWithoutCudaBuild) {
  PlanOptions o = Opts("tq-llama-21m", 64, 64);
  o.ram_gb.reset();
  o.device = PlanDevice::kCuda;
  if (BuiltWithCuda()) GTEST_SKIP() << "a CUDA build: covered on the GPU machine";
  try {
    MakeMemoryPlan(o);
    ADD_FAILURE() << "no error without CUDA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos) << e.what();
  }
}

int RunPlanVerb(const std::string& args) {
  const std::string cmd = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant") + " plan " +
                          args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PlanVerdict, VerbExitCodes) {
  const std::string m = "--model " + test::ModelDir("tq-llama-21m");
  EXPECT_EQ(RunPlanVerb(m + " --context 2048 --ram-gb 64"), 0);
  EXPECT_EQ(RunPlanVerb(m + " --context 2048 --ram-gb 0.01"), 1);
  EXPECT_EQ(RunPlanVerb("--model /nonexistent/dir"), 1);
  EXPECT_EQ(RunPlanVerb(m + " --group-size 32"), 2);  // needs --bits
  EXPECT_EQ(RunPlanVerb(m + " --bits 5"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --bits 4 --protect-layers 3-1"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --kv-bits 3 --kv-k-bits 3 --kv-v-bits 3"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --context -1"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --bits 4 --ram-gb 64 --json"), 0);
  EXPECT_EQ(RunPlanVerb(m + " --budget-bpw 3 --ram-gb 64"), 0);  // implies --bits 4
  EXPECT_EQ(RunPlanVerb(m + " --bits 3 --budget-bpw 3.5 --ram-gb 64 --json"), 0);
  EXPECT_EQ(RunPlanVerb(m + " --budget-bpw 1"), 2);
  EXPECT_EQ(RunPlanVerb(m + " --budget-bpw 3 --method affine"), 2);
}

}  // namespace
}  // namespace tq
