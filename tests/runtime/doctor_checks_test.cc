// doctor on the shared models (everything ok) and on broken copies built here from them: a
// missing shard, a truncated file, a wrong shape, a bad chat template, an unknown model_type, a
// missing tokenizer, TurboQuant blocks of a wrong version and inconsistent quantized tensors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "quant/packing.h"
#include "runtime/doctor/cpu_features.h"
#include "runtime/doctor/doctor.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const CheckResult* FindCheck(const DoctorReport& r, const std::string& check) {
  for (const auto& c : r.checks)
    if (c.check == check) return &c;
  return nullptr;
}

std::string Dump(const DoctorReport& r) { return DoctorToText(r); }

// The status of `check`, and its hint contains `needle`.
void Expect(const DoctorReport& r, const std::string& check, CheckStatus status,
            const std::string& needle = "") {
  const CheckResult* c = FindCheck(r, check);
  ASSERT_NE(c, nullptr) << "no check '" << check << "' in\n" << Dump(r);
  EXPECT_EQ(c->status, status) << check << ": " << c->hint;
  EXPECT_NE(c->hint.find(needle), std::string::npos) << check << ": " << c->hint;
}

DoctorReport Doctor(const std::string& dir) {
  DoctorOptions o;
  o.model_dir = dir;
  o.ram_gb = 64;
  return RunDoctor(o);
}

// A copy of a shared model: small files copied, the weights linked (tests replace what they
// break).
std::string CopyModel(const test::TempDir& tmp, const std::string& name) {
  const std::string src = test::ModelDir(name), dst = tmp.file(name);
  fs::create_directory(dst);
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string file = e.path().filename();
    if (file == "golden.safetensors" || file == "reference.json") continue;
    if (file == "model.safetensors") {
      fs::create_symlink(e.path(), dst + "/" + file);
    } else {
      fs::copy_file(e.path(), dst + "/" + file);
    }
  }
  return dst;
}

void EditJson(const std::string& path, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(ReadFileToString(path));
  edit(j);
  test::WriteFile(path, j.dump(2));
}

// Rewrites <dir>/model.safetensors through `edit(name, dtype, shape, bytes)` (return false to
// drop a tensor); extra tensors are appended.
struct NewTensor {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};
void RewriteWeights(const std::string& src_dir, const std::string& dir,
                    const std::function<bool(const std::string&, Shape&)>& edit,
                    const std::vector<NewTensor>& extra = {}) {
  const auto in = SafetensorsFile::Open(src_dir + "/model.safetensors");
  fs::remove(dir + "/model.safetensors");
  SafetensorsWriter w(dir + "/model.safetensors");
  std::vector<std::pair<std::string, Shape>> kept;
  for (const TensorInfo& t : in->tensors()) {
    Shape s = t.shape;
    if (!edit(t.name, s)) continue;
    w.Declare(t.name, t.dtype, s);
    kept.emplace_back(t.name, s);
  }
  for (const auto& e : extra) w.Declare(e.name, e.dtype, e.shape);
  for (const auto& [name, shape] : kept) {
    const TensorView v = in->View(name);
    w.WriteTensor(name, v.data, v.nbytes());
  }
  for (const auto& e : extra) w.WriteTensor(e.name, e.bytes.data(), e.bytes.size());
  w.Finish();
}

TEST(DoctorChecks, SharedModelsAreHealthy) {
  for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
    const DoctorReport r = Doctor(test::ModelDir(m));
    EXPECT_TRUE(r.ok()) << Dump(r);
    EXPECT_EQ(r.Count(CheckStatus::kWarn), 0) << Dump(r);
    for (const char* check : {"config.json", "weights", "tokenizer.json", "safetensors headers",
                              "tensors", "tokenizer", "chat template", "cpu", "kernels", "memory"})
      Expect(r, check, CheckStatus::kOk);
    Expect(r, "tokenizer", CheckStatus::kOk, "round-trips");
  }
  const DoctorReport r = Doctor(test::ModelDir("tq-qwen3moe-17m"));
  Expect(r, "tensors", CheckStatus::kOk, "632 expected tensors");
  const Json j = DoctorToJson(r);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["checks"].size(), r.checks.size());
}

TEST(DoctorChecks, ShardedCopyAndMissingShard) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = CopyModel(tmp, "tq-llama-21m");
  fs::remove(dir + "/model.safetensors");
  // Two shards: layers 0-2 and the rest.
  const auto in = SafetensorsFile::Open(src + "/model.safetensors");
  const std::string shard[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  Json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", Json::object()}};
  for (int s = 0; s < 2; ++s) {
    SafetensorsWriter w(dir + "/" + shard[s]);
    std::vector<std::string> names;
    for (const TensorInfo& t : in->tensors()) {
      const bool first = t.name.find("layers.0.") != std::string::npos ||
                         t.name.find("layers.1.") != std::string::npos ||
                         t.name.find("layers.2.") != std::string::npos;
      if (first != (s == 0)) continue;
      w.Declare(t.name, t.dtype, t.shape);
      names.push_back(t.name);
      index["weight_map"][t.name] = shard[s];
    }
    for (const auto& n : names) w.WriteTensor(n, in->View(n).data, in->View(n).nbytes());
    w.Finish();
  }
  test::WriteFile(dir + "/model.safetensors.index.json", index.dump());
  DoctorReport r = Doctor(dir);
  EXPECT_TRUE(r.ok()) << Dump(r);
  Expect(r, "weights", CheckStatus::kOk, "2 shards");

  fs::remove(dir + "/" + shard[1]);
  r = Doctor(dir);
  EXPECT_FALSE(r.ok());
  Expect(r, "weights", CheckStatus::kFail, shard[1]);
  Expect(r, "safetensors headers", CheckStatus::kFail);
  Expect(r, "memory", CheckStatus::kWarn, "skipped");
}

TEST(DoctorChecks, TruncatedWeights) {
  test::TempDir tmp;
  const std::string dir = CopyModel(tmp, "tq-llama-21m");
  const std::string path = dir + "/model.safetensors";
  fs::remove(path);
  fs::copy_file(test::ModelDir("tq-llama-21m") + "/model.safetensors", path);
  fs::resize_file(path, fs::file_size(path) / 2);
  const DoctorReport r = Doctor(dir);
  EXPECT_FALSE(r.ok());
  Expect(r, "safetensors headers", CheckStatus::kFail, "model.safetensors");
  // Everything that does not need the weights still runs.
  Expect(r, "tokenizer", CheckStatus::kOk);
  Expect(r, "chat template", CheckStatus::kOk);
}

TEST(DoctorChecks, WrongShapeDTypeAndExtraTensor) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = CopyModel(tmp, "tq-llama-21m");
  RewriteWeights(src, dir,
                 [](const std::string& name, Shape& s) {
                   if (name == "model.layers.3.self_attn.q_proj.weight")
                     s = {256, 1024};  // same bytes
                   return true;
                 },
                 {{"model.layers.0.self_attn.rotary_emb.inv_freq",
                   DType::F32,
                   {32},
                   std::vector<uint8_t>(128)}});
  DoctorReport r = Doctor(dir);
  EXPECT_FALSE(r.ok());
  Expect(r, "tensor shapes", CheckStatus::kFail,
         "model.layers.3.self_attn.q_proj.weight is [256, 1024]");
  Expect(r, "extra tensors", CheckStatus::kWarn, "rotary_emb.inv_freq");

  // A missing tensor.
  RewriteWeights(src, dir, [](const std::string& name, Shape&) {
    return name != "model.layers.5.mlp.down_proj.weight";
  });
  r = Doctor(dir);
  Expect(r, "tensors", CheckStatus::kFail, "model.layers.5.mlp.down_proj.weight");
}

TEST(DoctorChecks, BadChatTemplateAndTokenizer) {
  test::TempDir tmp;
  const std::string dir = CopyModel(tmp, "tq-qwen3moe-17m");
  EditJson(dir + "/tokenizer_config.json",
           [](Json& j) { j["chat_template"] = "{% for m in messages %}{{ m.content "; });
  DoctorReport r = Doctor(dir);
  EXPECT_FALSE(r.ok());
  Expect(r, "chat template", CheckStatus::kFail);
  Expect(r, "tokenizer", CheckStatus::kOk);
  // A template that raises on every conversation.
  EditJson(dir + "/tokenizer_config.json",
           [](Json& j) { j["chat_template"] = "{{ raise_exception('no chats here') }}"; });
  r = Doctor(dir);
  Expect(r, "chat template", CheckStatus::kFail, "no chats here");
  // No template at all: a warning.
  EditJson(dir + "/tokenizer_config.json", [](Json& j) { j.erase("chat_template"); });
  r = Doctor(dir);
  Expect(r, "chat template", CheckStatus::kWarn, "none");
  EXPECT_TRUE(r.ok()) << Dump(r);
  // A tokenizer.json that is not JSON; then none at all.
  test::WriteFile(dir + "/tokenizer.json", "{\"model\": ");
  r = Doctor(dir);
  Expect(r, "tokenizer", CheckStatus::kFail, "tokenizer.json");
  fs::remove(dir + "/tokenizer.json");
  fs::remove(dir + "/generation_config.json");
  r = Doctor(dir);
  Expect(r, "tokenizer.json", CheckStatus::kFail, "missing");
  Expect(r, "generation_config.json", CheckStatus::kWarn, "missing");
}

TEST(DoctorChecks, UnknownModelTypeAndNoDirectory) {
  test::TempDir tmp;
  const std::string dir = CopyModel(tmp, "tq-llama-21m");
  EditJson(dir + "/config.json", [](Json& j) { j["model_type"] = "gpt_neox"; });
  DoctorReport r = Doctor(dir);
  EXPECT_FALSE(r.ok());
  Expect(r, "config.json", CheckStatus::kFail, "gpt_neox");
  Expect(r, "config.json", CheckStatus::kFail, "llama");  // lists the supported ones
  Expect(r, "tensors", CheckStatus::kWarn, "skipped");
  Expect(r, "memory", CheckStatus::kWarn, "skipped");
  fs::remove(dir + "/config.json");
  r = Doctor(dir);
  Expect(r, "config.json", CheckStatus::kFail, "missing");
  r = Doctor(tmp.file("nope"));
  ASSERT_EQ(r.checks.size(), 1u);
  Expect(r, "model dir", CheckStatus::kFail, "no such directory");
}

TEST(DoctorChecks, TurboQuantBlockAndTensors) {
  test::TempDir tmp;
  const std::string src = test::ModelDir("tq-llama-21m");
  const std::string dir = CopyModel(tmp, "tq-llama-21m");
  auto set_block = [&](const Json& q) {
    EditJson(dir + "/config.json", [&](Json& j) { j["quantization"] = q; });
  };
  set_block({{"mode", "turboquant"}, {"format_version", 99}});
  DoctorReport r = Doctor(dir);
  Expect(r, "format version", CheckStatus::kFail, "format_version 99");
  set_block({{"mode", "gptq"}, {"format_version", 1}});
  r = Doctor(dir);
  Expect(r, "quantization", CheckStatus::kFail, "gptq");
  set_block({{"mode", "turboquant"}, {"format_version", 1}, {"bits", 4}, {"wibble", true}});
  r = Doctor(dir);
  Expect(r, "format version", CheckStatus::kOk);
  Expect(r, "quantization keys", CheckStatus::kWarn, "wibble");
  Expect(r, "quantized tensors", CheckStatus::kOk, "0 quantized");

  // One linear stored quantized (q4, group 64): [512, 1408] down projection of layer 0.
  const std::string p = "model.layers.0.mlp.down_proj";
  const int64_t out = 512, in = 1408;
  const int64_t row = int64_t(quant::PackedBytes(quant::CodeFormat::kQ4, in));
  auto quantized = [&](Shape codes_shape) {
    return std::vector<NewTensor>{{p + ".codes", DType::U8, codes_shape,
                                   std::vector<uint8_t>(size_t(NumElements(codes_shape)))},
                                  {p + ".scales",
                                   DType::F16,
                                   {out, in / 64},
                                   std::vector<uint8_t>(size_t(out * in / 64 * 2))},
                                  {p + ".codebook", DType::F32, {16}, std::vector<uint8_t>(64)}};
  };
  auto drop_weight = [&](const std::string& name, Shape&) { return name != p + ".weight"; };
  RewriteWeights(src, dir, drop_weight, quantized({out, row}));
  r = Doctor(dir);
  Expect(r, "quantized tensors", CheckStatus::kOk, "1 quantized linear(s) consistent (1 q4)");
  Expect(r, "tensors", CheckStatus::kOk);
  // Codes of the wrong width (as if 3-bit codes were stored with a 16-level codebook).
  RewriteWeights(src, dir, drop_weight,
                 quantized({out, int64_t(quant::PackedBytes(quant::CodeFormat::kQ3, in))}));
  r = Doctor(dir);
  Expect(r, "quantized tensors", CheckStatus::kFail, p + ".codes");
  EXPECT_FALSE(r.ok());

  // e8 scales (format 2): U8 scales + the F32 [256] table the block names.
  const std::string table = "model.layers.0.mlp_down.scale_table";
  set_block({{"mode", "turboquant"},
             {"format_version", 2},
             {"tensors", {{p, {{"scales", "e8"}, {"scale_table", table}}}}}});
  auto e8 = [&](bool with_table) {
    std::vector<NewTensor> t = quantized({out, row});
    t[1].dtype = DType::U8;
    t[1].bytes.resize(size_t(out * in / 64));
    if (with_table) t.push_back({table, DType::F32, {256}, std::vector<uint8_t>(1024)});
    return t;
  };
  RewriteWeights(src, dir, drop_weight, e8(true));
  r = Doctor(dir);
  Expect(r, "format version", CheckStatus::kOk);
  Expect(r, "quantized tensors", CheckStatus::kOk, "1 quantized linear(s) consistent (1 q4 e8)");
  RewriteWeights(src, dir, drop_weight, e8(false));
  r = Doctor(dir);
  Expect(r, "quantized tensors", CheckStatus::kFail, "scale_table is missing");
}

TEST(DoctorChecks, CpuFeaturesMatchProcCpuinfo) {
  const CpuFeatures f = DetectCpuFeatures();
  if (f.arch != "x86_64" || !fs::exists("/proc/cpuinfo")) GTEST_SKIP() << "x86-64 Linux only";
  const std::string info = ReadFileToString("/proc/cpuinfo");
  const size_t flags_at = info.find("\nflags");
  ASSERT_NE(flags_at, std::string::npos);
  const std::string flags =
      " " + info.substr(flags_at, info.find('\n', flags_at + 1) - flags_at) + " ";
  auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.fma, has("fma"));
  EXPECT_EQ(f.f16c, has("f16c"));
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512bw, has("avx512bw"));
  EXPECT_EQ(f.avx512_vnni, has("avx512_vnni"));
  EXPECT_EQ(f.avx_vnni, has("avx_vnni"));
  EXPECT_EQ(f.amx_tile, has("amx_tile"));
  EXPECT_EQ(f.amx_bf16, has("amx_bf16"));
}

int RunDoctorVerb(const std::string& args) {
  const std::string cmd = test::RequireFile(test::BinaryDir() + "/src/cli/turboquant") +
                          " doctor " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DoctorChecks, VerbExitCodes) {
  EXPECT_EQ(RunDoctorVerb("--model " + test::ModelDir("tq-llama-21m") + " --ram-gb 64"), 0);
  EXPECT_EQ(RunDoctorVerb("--model " + test::ModelDir("tq-llama-21m") + " --json --ram-gb 64"), 0);
  EXPECT_EQ(RunDoctorVerb("--model /nonexistent/dir"), 1);
  EXPECT_EQ(RunDoctorVerb("--model " + test::ModelDir("tq-llama-21m") + " --ram-gb 0.001"), 1);
  EXPECT_EQ(RunDoctorVerb("--bogus"), 2);
}

}  // namespace
}  // namespace tq

namespace tq {
namespace {

// MoE: every expert tensor is read at its offset (first and last byte) for the expert cache.
TEST(DoctorExperts, EveryExpertReadableAtItsOffset) {
  const DoctorReport r = Doctor(test::ModelDir("tq-qwen3moe-17m"));
  Expect(r, "expert streaming", CheckStatus::kOk, "576 expert tensors");
  // A dense model has no such check.
  EXPECT_EQ(FindCheck(Doctor(test::ModelDir("tq-llama-21m")), "expert streaming"), nullptr);
}

}  // namespace
}  // namespace tq
