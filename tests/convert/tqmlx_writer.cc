#include "tqmlx_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/half.h"
#include "core/mapped_file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "quant/codebook.h"
#include "quant/hadamard.h"
#include "quant/rng.h"

namespace tq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Tensor {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};
using Tensors = std::map<std::string, Tensor>;

template <typename T>
Tensor Make(DType dt, Shape shape, const std::vector<T>& v) {
  Tensor t{dt, std::move(shape), {}};
  t.bytes.resize(v.size() * sizeof(T));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::vector<uint16_t> ToF16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = F32ToF16(v[i]);
  return h;
}

void Write(const std::string& dir, const Tensors& ts) {
  SafetensorsWriter w(dir + "/model.safetensors");
  for (const auto& [n, t] : ts) w.Declare(n, t.dtype, t.shape);
  for (const auto& [n, t] : ts) w.WriteTensor(n, t.bytes.data(), t.bytes.size());
  w.Finish();
}

// mx.hadamard_transform's block: the largest m * 2^k dividing n, m in {1, 12, 20, 28}.
int64_t MlxBlock(int64_t n) {
  int64_t best = 1;
  for (int64_t m : {1, 12, 20, 28})
    for (int64_t s = m; s <= n; s *= 2)
      if (n % s == 0 && s > best) best = s;
  return best;
}

// One quantized matrix W [out, in] (fp32) in their layout, plus its float twin.
struct Quantized {
  std::vector<uint32_t> words;   // [out, words_per_row]
  std::vector<uint16_t> scales;  // [out, in / g] fp16
  std::vector<float> twin;       // [out, in]: the dequantized, un-rotated weights
  int64_t words_per_row = 0;
  std::vector<uint32_t> qjl_packed;  // [out, ceil(in / 32)]: bit j = (S r)_j >= 0
  std::vector<uint16_t> qjl_norms;   // [out] fp16 ‖r‖
};

// The QJL residual of the rotated-domain weights wr against their dequantized twin (both
// [out, in]): per row r = wr - deq, bits of S r (S = blockdiag(H) diag(σ) / √block), ν = ‖r‖; and
// the twin becomes deq + α ν Sᵀ b (α = √(π/2) / √in).
void AddQjl(const std::vector<float>& wr, int64_t out, int64_t in,
            const quant::HadamardSigns& sigma, int64_t block, Quantized& q) {
  const int64_t words = (in + 31) / 32;
  q.qjl_packed.assign(size_t(out * words), 0);
  q.qjl_norms.resize(size_t(out));
  std::vector<float> r(static_cast<size_t>(in)), b(static_cast<size_t>(in));
  for (int64_t row = 0; row < out; ++row) {
    double ss = 0;
    for (int64_t j = 0; j < in; ++j) {
      r[size_t(j)] = wr[size_t(row * in + j)] - q.twin[size_t(row * in + j)];
      ss += double(r[size_t(j)]) * r[size_t(j)];
    }
    const uint16_t nu = F32ToF16(float(std::sqrt(ss)));
    q.qjl_norms[size_t(row)] = nu;
    quant::RotateForward(sigma, block, r.data());
    for (int64_t j = 0; j < in; ++j) {
      const bool bit = r[size_t(j)] >= 0;
      if (bit) q.qjl_packed[size_t(row * words + j / 32)] |= 1u << (j % 32);
      b[size_t(j)] = bit ? 1.0f : -1.0f;
    }
    quant::RotateInverse(sigma, block, b.data());
    const float k = float(std::sqrt(M_PI / 2.0) / std::sqrt(double(in))) * F16ToF32(nu);
    for (int64_t j = 0; j < in; ++j) q.twin[size_t(row * in + j)] += k * b[size_t(j)];
  }
}

// signs: rotate the weights (null: as they are); unrotate_twin: the twin back in the input basis
// (false: fused, the rotated weights meet the unrotated input); qjl_sigma: add QJL residuals.
Quantized Quantize(const std::vector<float>& w, int64_t out, int64_t in, int bits, bool ternary,
                   int64_t g, const quant::HadamardSigns* signs, int64_t block,
                   const std::vector<float>& levels /* fp16-exact, ascending */, bool reverse,
                   bool unrotate_twin, const quant::HadamardSigns* qjl_sigma) {
  std::vector<float> wr = w;
  if (signs) quant::RotateRowsForward(*signs, block, wr.data(), out);
  const int per = ternary ? 20 : 32 / bits;
  Quantized q;
  q.words_per_row = (in + per - 1) / per;
  q.words.assign(size_t(out * q.words_per_row), 0);
  q.scales.resize(size_t(out * (in / g)));
  q.twin.resize(size_t(out * in));
  const int k = int(levels.size());
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t g0 = 0; g0 < in; g0 += g) {
      double ss = 0;
      for (int64_t j = g0; j < g0 + g; ++j) ss += double(wr[r * in + j]) * wr[r * in + j];
      const float rms = std::max(float(std::sqrt(ss / double(g))), 1e-7f);
      const uint16_t h = F32ToF16(rms);
      q.scales[size_t(r * (in / g) + g0 / g)] = h;
      const float sigma = F16ToF32(h);
      for (int64_t j = g0; j < g0 + g; ++j) {
        const float x = wr[r * in + j] / rms;
        int best = 0;
        for (int c = 1; c < k; ++c)
          if (std::fabs(x - levels[size_t(c)]) < std::fabs(x - levels[size_t(best)])) best = c;
        q.twin[size_t(r * in + j)] = sigma * levels[size_t(best)];
        const uint32_t stored = uint32_t(reverse ? k - 1 - best : best);
        uint32_t& word = q.words[size_t(r * q.words_per_row + j / per)];
        if (ternary) {
          uint32_t p = 1;
          for (int t = 0; t < j % per; ++t) p *= 3;
          word += stored * p;
        } else {
          word |= stored << ((j % per) * bits);
        }
      }
    }
  }
  if (qjl_sigma) AddQjl(wr, out, in, *qjl_sigma, block, q);
  if (signs && unrotate_twin) quant::RotateRowsInverse(*signs, block, q.twin.data(), out);
  return q;
}

std::vector<float> F32Of(const TensorView& v) {
  std::vector<float> f(size_t(v.numel()));
  ToF32(v, f.data());
  return f;
}

}  // namespace

void WriteTqMlxCheckpoint(const std::string& hf_dir, const std::string& out_dir,
                          const TqMlxWriteOptions& o) {
  fs::create_directories(out_dir);
  const bool twin = !o.float_twin_dir.empty();
  if (twin) fs::create_directories(o.float_twin_dir);
  for (const auto& e : fs::directory_iterator(hf_dir)) {
    const std::string n = e.path().filename();
    if (n.starts_with("tokenizer") || n.starts_with("generation_config")) {
      fs::copy_file(e.path(), fs::path(out_dir) / n, fs::copy_options::overwrite_existing);
      if (twin)
        fs::copy_file(e.path(), fs::path(o.float_twin_dir) / n,
                      fs::copy_options::overwrite_existing);
    }
  }
  const auto src = Checkpoint::OpenStored(hf_dir);
  Tensors mlx, flt;
  const std::regex expert(R"((.*)\.experts\.(\d+)\.(\w+)\.weight)");
  // Stacked experts: switch prefix -> per expert (index, weight name).
  std::map<std::string, std::map<int64_t, std::string>> switches;
  quant::SplitMix64 rng(o.seed);
  auto make_signs = [&](int64_t in, bool rotate) {
    std::vector<float> s(size_t(in), 1.0f);
    if (rotate) {
      uint64_t word = 0;
      for (int64_t i = 0; i < in; ++i) {
        if (i % 64 == 0) word = rng.Next();
        if ((word >> (i % 64)) & 1) s[size_t(i)] = -1.0f;
      }
    }
    return s;
  };
  const bool rotate = o.rotation != "none" || o.legacy_rotated_none;
  auto fused = [&](const std::string& p) {
    static const std::set<std::string> f = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"};
    return o.fuse_rotations && f.count(p.substr(p.rfind('.') + 1)) != 0;
  };
  const quant::Codebook& cb_dense = quant::GaussianCodebook(o.bits);
  auto fp16_levels = [](const quant::Codebook& cb) {
    std::vector<float> l;
    for (float v : cb.levels) l.push_back(F16ToF32(F32ToF16(v)));
    return l;
  };
  // Writes <p>.{weight,scales,codebook,signs} for `experts` stacked matrices [E, out, in].
  auto emit = [&](const std::string& p, const std::vector<std::vector<float>>& ws, int64_t out,
                  int64_t in, bool ternary, const std::vector<std::string>& twin_names) {
    const std::vector<float> levels = fp16_levels(ternary ? quant::TernaryCodebook() : cb_dense);
    const std::vector<float> sv = make_signs(in, rotate);
    const int64_t block = MlxBlock(in);
    std::vector<int8_t> s8(sv.size());
    for (size_t i = 0; i < sv.size(); ++i) s8[i] = sv[i] < 0 ? -1 : 1;
    const quant::HadamardSigns signs = quant::HadamardSigns::FromInt8(s8);
    const bool stacked = p.find(".switch_mlp.") != std::string::npos;
    const bool qjl = o.qjl && !stacked;
    const std::vector<float> sigma_f =
        qjl ? make_signs(in, true) : std::vector<float>(size_t(in), 1);
    std::vector<int8_t> sigma8(sigma_f.size());
    for (size_t i = 0; i < sigma_f.size(); ++i) sigma8[i] = sigma_f[i] < 0 ? -1 : 1;
    const quant::HadamardSigns sigma = quant::HadamardSigns::FromInt8(sigma8);
    std::vector<uint32_t> qjl_packed;
    std::vector<uint16_t> qjl_norms;
    std::vector<uint32_t> words;
    std::vector<uint16_t> scales;
    int64_t wpr = 0;
    for (size_t e = 0; e < ws.size(); ++e) {
      Quantized q = Quantize(ws[e], out, in, ternary ? 2 : o.bits, ternary, o.group_size,
                             rotate ? &signs : nullptr, block, levels, o.reverse_codebook,
                             !fused(p), qjl ? &sigma : nullptr);
      qjl_packed = q.qjl_packed;
      qjl_norms = q.qjl_norms;
      wpr = q.words_per_row;
      words.insert(words.end(), q.words.begin(), q.words.end());
      scales.insert(scales.end(), q.scales.begin(), q.scales.end());
      if (twin) flt[twin_names[e]] = Make(DType::F32, {out, in}, q.twin);
    }
    const int64_t groups = in / o.group_size;
    const int64_t ne = int64_t(ws.size());
    mlx[p + ".weight"] = Make(DType::U32, stacked ? Shape{ne, out, wpr} : Shape{out, wpr}, words);
    mlx[p + ".scales"] =
        Make(DType::F16, stacked ? Shape{ne, out, groups} : Shape{out, groups}, scales);
    std::vector<float> stored = levels;
    if (o.reverse_codebook) std::reverse(stored.begin(), stored.end());
    mlx[p + ".codebook"] = Make(DType::F16, {int64_t(stored.size())}, ToF16(stored));
    mlx[p + ".signs"] = Make(DType::F16, {in}, ToF16(sv));
    if (qjl) {
      mlx[p + ".qjl_packed"] = Make(DType::U32, {out, (in + 31) / 32}, qjl_packed);
      mlx[p + ".qjl_norms"] = Make(DType::F16, {out}, qjl_norms);
      mlx[p + ".qjl_signs"] = Make(DType::F16, {in}, ToF16(sigma_f));
    }
  };

  for (const std::string& n : src->Names()) {
    const TensorView v = src->View(n);
    bool linear = v.rank() == 2 && n.ends_with(".weight") &&
                  n.find(".layers.") != std::string::npos && !n.ends_with("norm.weight") &&
                  !n.ends_with("mlp.gate.weight") && v.dim(0) >= 32 && v.dim(1) >= 32;
    std::smatch m;
    if (linear && std::regex_match(n, m, expert)) {
      switches[m[1].str() + ".switch_mlp." + m[3].str()][std::stoll(m[2].str())] = n;
      continue;
    }
    if (linear && v.dim(1) % o.group_size != 0) linear = false;  // skipped, as theirs does
    if (linear) {
      emit(n.substr(0, n.size() - 7), {F32Of(v)}, v.dim(0), v.dim(1), false, {n});
      continue;
    }
    Tensor t{v.dtype, v.shape, {v.bytes(), v.bytes() + v.nbytes()}};
    if (twin) flt[n] = t;
    mlx[n] = std::move(t);
  }
  for (const auto& [p, experts] : switches) {
    const TensorView first = src->View(experts.begin()->second);
    if (first.dim(1) % o.group_size != 0) {
      // Their converter skips a linear the group size does not divide: the experts stay stacked
      // at the source dtype.
      Tensor t{first.dtype, {int64_t(experts.size()), first.dim(0), first.dim(1)}, {}};
      for (const auto& [e, n] : experts) {
        const TensorView v = src->View(n);
        t.bytes.insert(t.bytes.end(), v.bytes(), v.bytes() + v.nbytes());
        if (twin) flt[n] = {v.dtype, v.shape, {v.bytes(), v.bytes() + v.nbytes()}};
      }
      mlx[p + ".weight"] = std::move(t);
      continue;
    }
    std::vector<std::vector<float>> ws;
    std::vector<std::string> names;
    int64_t out = 0, in = 0;
    for (const auto& [e, n] : experts) {
      const TensorView v = src->View(n);
      out = v.dim(0);
      in = v.dim(1);
      ws.push_back(F32Of(v));
      names.push_back(n);
    }
    emit(p, ws, out, in, o.ternary_experts, names);
  }
  Write(out_dir, mlx);
  if (twin) Write(o.float_twin_dir, flt);

  json cfg = json::parse(ReadFileToString(hf_dir + "/config.json"));
  if (twin) WriteFileAtomic(o.float_twin_dir + "/config.json", cfg.dump(2));
  cfg["quantization"] = {{"mode", "turboquant"},
                         {"bits", o.bits},
                         {"group_size", o.group_size},
                         {"use_qjl", o.qjl},
                         {"rotation", o.rotation},
                         {"rotation_seed", 42},
                         {"fuse_rotations", o.fuse_rotations},
                         {"attn_bits", nullptr},
                         {"mlp_bits", nullptr},
                         {"mlp_group_size", nullptr},
                         {"ternary_experts", o.ternary_experts},
                         {"expert_down_bits", nullptr},
                         {"codebook", cb_dense.levels}};
  WriteFileAtomic(out_dir + "/config.json", cfg.dump(2));
}

}  // namespace tq::test
