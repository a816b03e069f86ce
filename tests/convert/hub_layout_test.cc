// Published quantized layouts convert decodes (model/source_tensors.h), written here from the
// tiny arch checkpoints: tq-arch-gpt-oss with its experts encoded to MXFP4 as the hub stores
// gpt-oss ("*_blocks" [E, out, in/32, 16] + "*_scales" [E, out, in/32], e2m1 with e8m0 scales of
// 32), tq-arch-deepseek-v3 with its decoder linears encoded to FP8 E4M3 with 128 × 128 block
// scales ("weight_scale_inv", as DeepSeek-V3 publishes). Converting each gives exactly the tensors
// that converting its dequantized weights (written in bf16 / f32 by the encoder itself) gives;
// broken inputs are errors naming the tensor; generate refuses them, saying to convert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert/calibration.h"
#include "convert/convert.h"
#include "convert_helpers.h"
#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "io/hub_formats.h"
#include "model/model.h"
#include "runtime/doctor/doctor.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/error_of.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string Arch(const std::string& name) {
  const std::string dir = test::ModelDir("arch/tq-arch-" + name);
  test::RequireFile(dir + "/model.safetensors");
  return dir;
}

// A checkpoint dir from tensors and a config (tokenizer files copied from `like`).
void WriteDir(const std::string& like, const std::string& dir, const test::TensorMap& tensors,
              const Json& config) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(like)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("tokenizer") || n.starts_with("generation_config"))
      fs::copy_file(e.path(), fs::path(dir) / n);
  }
  test::WriteFile(dir + "/config.json", config.dump(2));
  test::WriteTensors(dir, tensors);
}

std::vector<float> Floats(const test::RawTensor& t) {
  std::vector<float> v(size_t(NumElements(t.shape)));
  ToF32(TensorView{t.bytes.data(), t.dtype, t.shape}, v.data());
  return v;
}

template <typename T>
test::RawTensor Raw(DType dtype, Shape shape, const std::vector<T>& v) {
  test::RawTensor t{dtype, std::move(shape), std::vector<uint8_t>(v.size() * sizeof(T))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

test::RawTensor Bf16(Shape shape, const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = F32ToBf16(v[i]);
  return Raw(DType::BF16, std::move(shape), b);
}

// MXFP4 of 32 values: the e8m0 exponent that brings the largest magnitude to at most 6, each
// value the nearest e2m1 level (ties to the lower). Returns the dequantized values in `deq`.
void EncodeMxfp4Block(const float* v, uint8_t* bytes, uint8_t* scale, float* deq) {
  static constexpr float kLevels[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
  const int e = amax > 0 ? std::clamp(int(std::ceil(std::log2(amax / 6.0f))), -127, 127) : -127;
  *scale = uint8_t(e + 127);
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(v[i]) / std::ldexp(1.0f, e);
    int k = 0;
    for (int j = 1; j < 8; ++j)
      if (std::fabs(kLevels[j] - a) < std::fabs(kLevels[k] - a)) k = j;
    const uint8_t code = uint8_t(k | (std::signbit(v[i]) ? 8 : 0));
    deq[i] = (std::signbit(v[i]) ? -1.0f : 1.0f) * std::ldexp(kLevels[k], e);
    if (i % 2 == 0) {
      bytes[i / 2] = code;
    } else {
      bytes[i / 2] |= uint8_t(code << 4);
    }
  }
}

// gpt-oss in MXFP4 (`mxfp4`) and its dequantized weights in the published bf16 layout (`ref`).
void WriteGptOssMxfp4(const std::string& mxfp4, const std::string& ref) {
  const std::string src = Arch("gpt-oss");
  const test::TensorMap in = test::ReadTensors(src);
  test::TensorMap q, deq;
  for (const auto& [name, t] : in) {
    const bool expert =
        name.ends_with("experts.gate_up_proj") || name.ends_with("experts.down_proj");
    if (!expert) {
      q[name] = deq[name] = t;
      continue;
    }
    // Stored [E, in, out]; MXFP4 holds [E, out, in] in blocks of 32 along in.
    const int64_t E = t.shape[0], in_dim = t.shape[1], out = t.shape[2], G = in_dim / 32;
    const std::vector<float> w = Floats(t);
    std::vector<uint8_t> blocks(size_t(E * out * G * 16)), scales(size_t(E * out * G));
    std::vector<float> back(w.size()), row(static_cast<size_t>(in_dim)),
        row_deq(static_cast<size_t>(in_dim));
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in_dim; ++i) row[size_t(i)] = w[size_t((e * in_dim + i) * out + o)];
        for (int64_t g = 0; g < G; ++g) {
          const int64_t b = (e * out + o) * G + g;
          EncodeMxfp4Block(row.data() + g * 32, blocks.data() + b * 16, scales.data() + b,
                           row_deq.data() + g * 32);
        }
        for (int64_t i = 0; i < in_dim; ++i)
          back[size_t((e * in_dim + i) * out + o)] = row_deq[size_t(i)];
      }
    }
    q[name + "_blocks"] = Raw(DType::U8, {E, out, G, 16}, blocks);
    q[name + "_scales"] = Raw(DType::U8, {E, out, G}, scales);
    deq[name] = Bf16(t.shape, back);
    // The dequantized weights are exact in bf16 (e2m1 · 2^k has two significant bits).
    for (size_t i = 0; i < back.size(); ++i)
      ASSERT_EQ(Bf16ToF32(F32ToBf16(back[i])), back[i]) << name << " " << i;
  }
  Json cfg = Json::parse(ReadFileToString(src + "/config.json"));
  WriteDir(src, ref, deq, cfg);
  cfg["quantization_config"] = {{"modules_to_not_convert", {"model.layers.*.self_attn", "lm_head"}},
                                {"quant_method", "mxfp4"}};
  WriteDir(src, mxfp4, q, cfg);
}

// The nearest E4M3FN value's code (ties to the even code), |v| <= 448.
uint8_t EncodeE4m3(float v) {
  static const std::vector<float> positive = [] {
    std::vector<float> p;
    for (int c = 0; c < 0x7F; ++c) p.push_back(E4m3ToF32(uint8_t(c)));
    return p;
  }();
  const float a = std::fabs(v);
  int best = 0;
  for (int c = 1; c < int(positive.size()); ++c) {
    const float d = std::fabs(positive[size_t(c)] - a), db = std::fabs(positive[size_t(best)] - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return uint8_t(best | (std::signbit(v) ? 0x80 : 0));
}

// deepseek-v3 with its decoder linears in FP8 (`fp8`, blocks of `block`) and their dequantized
// f32 weights (`ref`, fp8 value × its block's scale_inv, the product the decoder computes).
void WriteDeepseekFp8(const std::string& fp8, const std::string& ref, int64_t block = 128) {
  const std::string src = Arch("deepseek-v3");
  const test::TensorMap in = test::ReadTensors(src);
  test::TensorMap q, deq;
  for (const auto& [name, t] : in) {
    const bool linear = name.starts_with("model.layers.") && name.ends_with(".weight") &&
                        t.shape.size() == 2 && !name.ends_with(".mlp.gate.weight");
    if (!linear) {
      q[name] = deq[name] = t;
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const int64_t br = (rows + block - 1) / block, bc = (cols + block - 1) / block;
    const std::vector<float> w = Floats(t);
    // scale_inv = the block's largest magnitude / 448 (E4M3's largest finite value).
    std::vector<float> scale(size_t(br * bc), 0.0f), back(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& s = scale[size_t((r / block) * bc + c / block)];
        s = std::max(s, std::fabs(w[size_t(r * cols + c)]) / 448.0f);
      }
    for (float& s : scale)
      if (s == 0) s = 1;
    std::vector<uint8_t> codes(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = size_t(r * cols + c);
        const float s = scale[size_t((r / block) * bc + c / block)];
        codes[i] = EncodeE4m3(w[i] / s);
        back[i] = E4m3ToF32(codes[i]) * s;
      }
    q[name] = Raw(DType::F8_E4M3, t.shape, codes);
    q[name + "_scale_inv"] = Raw(DType::F32, {br, bc}, scale);
    deq[name] = Raw(DType::F32, t.shape, back);
  }
  Json cfg = Json::parse(ReadFileToString(src + "/config.json"));
  WriteDir(src, ref, deq, cfg);
  cfg["quantization_config"] = {{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", {block, block}}};
  WriteDir(src, fp8, q, cfg);
}

// Converts `a` and `b` alike and expects the same tensors, byte for byte.
void ExpectSameConversion(const std::string& a, const std::string& b, const test::TempDir& tmp,
                          double budget_bpw = 0) {
  for (const char* which : {"a", "b"}) {
    ConvertOptions o =
        test::Options(std::string(which) == "a" ? a : b, tmp.file(std::string("out_") + which), 4);
    o.budget_bpw = budget_bpw;
    o.streaming = std::string(which) == "a";  // row-chunked reads of the decoded tensors too
    Convert(o);
  }
  const test::TensorMap ta = test::ReadTensors(tmp.file("out_a"));
  const test::TensorMap tb = test::ReadTensors(tmp.file("out_b"));
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, t] : tb) {
    ASSERT_TRUE(ta.count(name)) << name;
    EXPECT_EQ(ta.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(ta.at(name).shape, t.shape) << name;
    EXPECT_TRUE(ta.at(name).bytes == t.bytes) << name;
  }
  // The same map (in another order where the sources' tensors were stored in another order).
  const auto ca = nlohmann::json::parse(ReadFileToString(tmp.file("out_a") + "/config.json"));
  const auto cb = nlohmann::json::parse(ReadFileToString(tmp.file("out_b") + "/config.json"));
  EXPECT_EQ(ca["quantization"]["tensors"], cb["quantization"]["tensors"]);
  // The source's quantization_config moves aside: the output is not MXFP4 / FP8.
  EXPECT_FALSE(ca.contains("quantization_config"));
  EXPECT_TRUE(ca.contains("source_quantization"));
}

using test::ErrorOf;

TEST(HubLayout, GptOssMxfp4ConvertsAsItsDequantizedWeights) {
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  ExpectSameConversion(tmp.file("mxfp4"), tmp.file("ref"), tmp);
  // The conversion runs (and the experts are packed: no bf16 copy of them is left).
  const test::TensorMap out = test::ReadTensors(tmp.file("out_a"));
  EXPECT_TRUE(out.count("model.layers.2.mlp.experts.6.up_proj.codes"));
  const std::vector<float> logits =
      test::PrefillLogits(tmp.file("out_a"), test::GoldenIds(Arch("gpt-oss")));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(HubLayout, GptOssMxfp4WithABudget) {
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  ExpectSameConversion(tmp.file("mxfp4"), tmp.file("ref"), tmp, 3.5);
}

TEST(HubLayout, DeepseekV3Fp8ConvertsAsItsDequantizedWeights) {
  test::TempDir tmp;
  WriteDeepseekFp8(tmp.file("fp8"), tmp.file("ref"));
  ExpectSameConversion(tmp.file("fp8"), tmp.file("ref"), tmp);
  // A block size other than 128 is read from quantization_config.weight_block_size.
  test::TempDir tmp2;
  WriteDeepseekFp8(tmp2.file("fp8"), tmp2.file("ref"), 32);
  ExpectSameConversion(tmp2.file("fp8"), tmp2.file("ref"), tmp2);
}

TEST(HubLayout, GenerateRefusesThemSayingToConvert) {
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  WriteDeepseekFp8(tmp.file("fp8"), tmp.file("ref8"));
  const std::string a = ErrorOf([&] { Model::Load(tmp.file("mxfp4"), {.device = "cpu"}); });
  EXPECT_NE(a.find("_blocks' is stored as MXFP4"), std::string::npos) << a;
  EXPECT_NE(a.find("turboquant convert"), std::string::npos) << a;
  const std::string b = ErrorOf([&] { Model::Load(tmp.file("fp8"), {.device = "cpu"}); });
  EXPECT_NE(b.find("is stored as FP8"), std::string::npos) << b;
  EXPECT_NE(b.find("turboquant convert"), std::string::npos) << b;
}

TEST(HubLayout, OptionsThatRunTheSourceModelAreRefused) {
  // --self-calibrate and measured sensitivities load the source, which does not load as stored.
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  ConvertOptions calib = test::Options(tmp.file("mxfp4"), tmp.file("c"), 4);
  calib.self_calibrate_tokens = kMinCalibrationTokens;
  ConvertOptions measured = test::Options(tmp.file("mxfp4"), tmp.file("m"), 4);
  measured.budget_bpw = 3.5;
  measured.measure_sensitivity = true;
  for (const ConvertOptions& o : {calib, measured}) {
    try {
      Convert(o);
      ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("is decoded from MXFP4"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(o.out_dir));
  }
}

TEST(HubLayout, DoctorAndPlanReadThemAsConvertDoes) {
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  WriteDeepseekFp8(tmp.file("fp8"), tmp.file("ref8"));
  for (const char* dir : {"mxfp4", "fp8"}) {
    SCOPED_TRACE(dir);
    DoctorOptions d;
    d.model_dir = tmp.file(dir);
    d.ram_gb = 64;
    const DoctorReport r = RunDoctor(d);
    bool said = false;
    for (const auto& c : r.checks) {
      if (c.check == "hub layout") {
        said = true;
        EXPECT_EQ(c.status, CheckStatus::kWarn);
        EXPECT_NE(c.hint.find("convert"), std::string::npos) << c.hint;
      } else if (c.check == "tensors" || c.check == "tensor shapes" || c.check == "tensor dtypes" ||
                 c.check == "extra tensors") {
        EXPECT_EQ(c.status, CheckStatus::kOk) << c.check << ": " << c.hint;
      }
    }
    EXPECT_TRUE(said) << DoctorToText(r);
  }
  // plan --bits 4 of the published layout projects what converting its dequantized weights
  // gives; as stored, it says that only convert reads it.
  auto plan = [&](const std::string& dir, bool recipe) {
    PlanOptions p;
    p.model_dir = dir;
    p.context = 256;
    p.ram_gb = 64;
    if (recipe) p.recipe = test::Options(dir, "", 4).recipe;
    return MakeMemoryPlan(p);
  };
  for (const auto& [q, ref] : {std::pair{"mxfp4", "ref"}, std::pair{"fp8", "ref8"}}) {
    SCOPED_TRACE(q);
    const MemoryPlan a = plan(tmp.file(q), true), b = plan(tmp.file(ref), true);
    EXPECT_EQ(a.weights_bytes, b.weights_bytes);
    EXPECT_EQ(a.expert_bytes, b.expert_bytes);
    EXPECT_EQ(a.unused_bytes, 0);
    const MemoryPlan stored = plan(tmp.file(q), false);
    ASSERT_FALSE(stored.notes.empty());
    EXPECT_NE(stored.notes[0].find("only convert reads"), std::string::npos) << stored.notes[0];
  }
}

// Each edit of a good file gives a convert error naming `needle`.
void ExpectBroken(const std::string& good, const test::TempDir& tmp, const std::string& name,
                  const std::function<void(test::TensorMap&)>& edit, const std::string& needle) {
  const std::string dir = tmp.file(name);
  fs::copy(good, dir);
  for (const auto& e : fs::directory_iterator(dir))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  test::TensorMap t = test::ReadTensors(dir);
  edit(t);
  test::WriteTensors(dir, t);
  const std::string out = tmp.file(name + "_out");
  const std::string err = ErrorOf([&] { Convert(test::Options(dir, out, 4)); });
  EXPECT_NE(err.find(needle), std::string::npos) << name << ": " << err;
  EXPECT_FALSE(fs::exists(out)) << name;
}

TEST(HubLayout, BrokenInputsNameTheTensor) {
  test::TempDir tmp;
  WriteGptOssMxfp4(tmp.file("mxfp4"), tmp.file("ref"));
  WriteDeepseekFp8(tmp.file("fp8"), tmp.file("ref8"));
  const std::string gu = "model.layers.1.mlp.experts.gate_up_proj";
  ExpectBroken(
      tmp.file("mxfp4"), tmp, "no_scales", [&](auto& t) { t.erase(gu + "_scales"); },
      "'" + gu + "_scales' is missing");
  ExpectBroken(
      tmp.file("mxfp4"), tmp, "no_bias", [&](auto& t) { t.erase(gu + "_bias"); },
      "'" + gu + "_bias' is missing");
  ExpectBroken(
      tmp.file("mxfp4"), tmp, "scales_shape",
      [&](auto& t) {
        test::RawTensor& s = t.at(gu + "_scales");
        s.shape = {s.shape[0], s.shape[1] / 2, s.shape[2] * 2};
      },
      "[mxfp4 " + gu + "_blocks]");
  ExpectBroken(
      tmp.file("mxfp4"), tmp, "one_expert_less",
      [&](auto& t) {
        for (const char* suffix : {"_blocks", "_scales"}) {
          test::RawTensor& x = t.at(gu + suffix);
          x.bytes.resize(x.bytes.size() / size_t(x.shape[0]) * size_t(x.shape[0] - 1));
          x.shape[0] -= 1;
        }
      },
      "'" + gu + "_blocks'");
  const std::string kv_b = "model.layers.2.self_attn.kv_b_proj.weight";
  ExpectBroken(
      tmp.file("fp8"), tmp, "no_scale_inv", [&](auto& t) { t.erase(kv_b + "_scale_inv"); },
      "'" + kv_b + "_scale_inv' is missing");
  ExpectBroken(
      tmp.file("fp8"), tmp, "scale_inv_shape",
      [&](auto& t) {
        test::RawTensor& s = t.at(kv_b + "_scale_inv");
        s.bytes.resize(s.bytes.size() * 2);
        s.shape[1] *= 2;
      },
      "[fp8 " + kv_b + "] weight_scale_inv is");
  ExpectBroken(
      tmp.file("ref8"), tmp, "stray_scale_inv",
      [&](auto& t) {
        t[kv_b + "_scale_inv"] = Raw(DType::F32, {1, 1}, std::vector<float>{1.0f});
      },
      "'" + kv_b + "', which is F32");
}

}  // namespace
}  // namespace tq
