#include "model/source_tensors.h"

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "io/hub_formats.h"
#include "io/model_config.h"
#include "model/architecture.h"
#include "model/layer_spec.h"
#include "model/transpose_copy.h"

namespace tq {
namespace {

constexpr const char* kWhere = "hub layout";
constexpr std::string_view kBlocks = "_blocks", kScales = "_scales", kScaleInv = "_scale_inv";

// quantization_config.weight_block_size of config.json ([rows, cols]; default 128 × 128).
std::pair<int64_t, int64_t> Fp8BlockSize(const ModelConfig& config) {
  nlohmann::json raw;
  try {
    raw = nlohmann::json::parse(config.raw_json);
  } catch (const nlohmann::json::exception&) {
    return {128, 128};
  }
  if (!raw.is_object() || !raw.contains("quantization_config")) return {128, 128};
  const nlohmann::json& q = raw["quantization_config"];
  if (!q.is_object() || !q.contains("weight_block_size")) return {128, 128};
  const nlohmann::json& b = q["weight_block_size"];
  TQ_CHECK(b.is_array() && b.size() == 2 && b[0].is_number_integer() && b[1].is_number_integer() &&
               b[0].get<int64_t>() > 0 && b[1].get<int64_t>() > 0,
           kWhere, "config.json quantization_config.weight_block_size is {}, expected [rows, cols]",
           b.dump());
  return {b[0].get<int64_t>(), b[1].get<int64_t>()};
}

class Builder {
 public:
  Builder(const ModelConfig& config, const std::vector<TensorInfo>& stored)
      : config_(config), stored_(stored) {
    for (size_t i = 0; i < stored.size(); ++i) index_[stored[i].name] = i;
  }

  std::vector<SourceTensor> Build() {
    const Architecture& arch = FindArchitecture(config_);
    std::map<size_t, std::vector<SourceTensor>> experts_at;  // stored index -> what replaces it
    if (arch.fused_experts) {
      const ModelSpec spec = BuildModelSpec(config_, arch);
      for (const LayerSpec& L : spec.layers)
        if (L.ffn.kind == FfnKind::kMoe) FusedExperts(arch.names, L, spec.hidden, experts_at);
    }
    // FP8 weights first: their scales may be stored before them.
    const auto [block_rows, block_cols] = Fp8BlockSize(config_);
    std::map<size_t, SourceTensor> fp8;
    for (size_t i = 0; i < stored_.size(); ++i)
      if (stored_[i].dtype == DType::F8_E4M3) fp8[i] = Fp8(i, block_rows, block_cols);
    std::vector<SourceTensor> out;
    for (size_t i = 0; i < stored_.size(); ++i) {
      const TensorInfo& t = stored_[i];
      if (const auto it = experts_at.find(i); it != experts_at.end()) {
        for (SourceTensor& s : it->second) out.push_back(std::move(s));
        continue;
      }
      if (const auto it = fp8.find(i); it != fp8.end()) {
        out.push_back(std::move(it->second));
        continue;
      }
      if (consumed_.count(i)) continue;
      if (t.name.ends_with(kBlocks))
        Fail(kWhere,
             "tensor '{}' looks like MXFP4 blocks, but only gpt_oss's expert projections are read "
             "in MXFP4 (this is {})",
             t.name, config_.model_type);
      if (t.name.ends_with(kScaleInv)) {
        const std::string base = t.name.substr(0, t.name.size() - kScaleInv.size());
        const auto w = index_.find(base);
        Fail(kWhere, "tensor '{}' scales '{}', which is {}: block scales go with F8_E4M3 weights",
             t.name, base, w == index_.end() ? "missing" : DTypeName(stored_[w->second].dtype));
      }
      SourceTensor s;
      s.info = t;
      s.stored = i;
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  // Index of stored tensor `name`, or throws naming it and why it is needed.
  size_t Need(const std::string& name, const std::string& why) {
    const auto it = index_.find(name);
    if (it == index_.end()) Fail(kWhere, "tensor '{}' is missing: {}", name, why);
    return it->second;
  }
  bool Has(const std::string& name) const { return index_.count(name) > 0; }

  void CheckFloat(size_t i, const Shape& want) const {
    const TensorInfo& t = stored_[i];
    TQ_CHECK(t.shape == want &&
                 (t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32),
             kWhere, "tensor '{}' is {} {}, expected F32/F16/BF16 {}", t.name, DTypeName(t.dtype),
             ShapeToString(t.shape), ShapeToString(want));
  }

  SourceTensor Fp8(size_t i, int64_t block_rows, int64_t block_cols) {
    const TensorInfo& t = stored_[i];
    const size_t s = Need(t.name + std::string(kScaleInv),
                          fmt::format("the F8_E4M3 weight '{}' needs its block scales", t.name));
    const TensorInfo& sc = stored_[s];
    TQ_CHECK(sc.dtype == DType::F32 || sc.dtype == DType::BF16 || sc.dtype == DType::F16, kWhere,
             "tensor '{}' is {}, expected F32 block scales", sc.name, DTypeName(sc.dtype));
    CheckFp8BlockScales(t.shape, sc.shape, block_rows, block_cols, t.name);
    consumed_.insert(s);
    SourceTensor out;
    out.info.name = t.name;
    out.info.dtype = DType::F32;
    out.info.shape = t.shape;
    out.info.nbytes = uint64_t(NumElements(t.shape)) * 4;
    out.kind = SourceTensor::Kind::kFp8Block;
    out.stored = i;
    out.scales = s;
    out.block_rows = block_rows;
    out.block_cols = block_cols;
    return out;
  }

  // One projection of a layer's fused experts ("<name>" bf16 [E, in, W], or "<name>_blocks" +
  // "_scales" MXFP4 [E, W, in/32, 16]) with its bias "<name>_bias" [E, W]: `parts` (offset, step,
  // per-expert prefix pattern) are the rows of W each per-expert linear takes.
  struct Part {
    std::string pattern;  // the per-expert module prefix ("...experts.{E}.gate_proj")
    int64_t step, offset;
  };
  void Projection(const std::string& name, int64_t experts, int64_t in, int64_t width,
                  const std::vector<Part>& parts, int64_t layer,
                  std::vector<std::vector<SourceTensor>>& per_expert, size_t& first) {
    const size_t bias = Need(name + "_bias", "the experts' biases");
    CheckFloat(bias, {experts, width});
    consumed_.insert(bias);
    first = std::min(first, bias);
    const int64_t rows = width / int64_t(parts.size());
    size_t weights = 0, scales = 0;
    const bool mxfp4 = !Has(name) && Has(name + std::string(kBlocks));
    if (mxfp4) {
      weights = index_.at(name + std::string(kBlocks));
      scales = Need(name + std::string(kScales),
                    fmt::format("the MXFP4 blocks '{}{}' need their e8m0 scales", name, kBlocks));
      const TensorInfo &b = stored_[weights], &s = stored_[scales];
      TQ_CHECK(b.dtype == DType::U8 && s.dtype == DType::U8, kWhere,
               "MXFP4 tensors '{}' and '{}' are {} and {}, expected U8", b.name, s.name,
               DTypeName(b.dtype), DTypeName(s.dtype));
      const Shape shape = Mxfp4Shape(b.shape, s.shape, b.name);
      TQ_CHECK(shape == (Shape{experts, width, in}), kWhere,
               "MXFP4 tensor '{}' {} holds {} values, expected [{}, {}, {}] (experts, out, in) "
               "from config.json",
               b.name, ShapeToString(b.shape), ShapeToString(shape), experts, width, in);
      consumed_.insert(scales);
      first = std::min({first, weights, scales});
    } else {
      weights = Need(name, fmt::format("the experts' weights (or MXFP4 '{}{}' + '{}{}')", name,
                                       kBlocks, name, kScales));
      CheckFloat(weights, {experts, in, width});
      first = std::min(first, weights);
    }
    consumed_.insert(weights);
    for (int64_t e = 0; e < experts; ++e) {
      for (const Part& p : parts) {
        const std::string prefix = TensorName(p.pattern, layer, e);
        SourceTensor w;
        w.info.name = prefix + ".weight";
        w.info.dtype = mxfp4 ? DType::BF16 : stored_[weights].dtype;
        w.info.shape = {rows, in};
        w.info.nbytes = uint64_t(rows * in) * DTypeSize(w.info.dtype);
        w.kind = mxfp4 ? SourceTensor::Kind::kMxfp4Expert : SourceTensor::Kind::kFusedExpert;
        w.stored = weights;
        w.scales = scales;
        w.expert = e;
        w.step = p.step;
        w.offset = p.offset;
        SourceTensor b = w;
        b.info.name = prefix + ".bias";
        b.info.dtype = stored_[bias].dtype;
        b.info.shape = {rows};
        b.info.nbytes = uint64_t(rows) * DTypeSize(b.info.dtype);
        b.kind = SourceTensor::Kind::kFusedExpert;
        b.stored = bias;
        b.bias = true;
        per_expert[size_t(e)].push_back(std::move(w));
        per_expert[size_t(e)].push_back(std::move(b));
      }
    }
  }

  // gpt_oss's fused experts of layer L (either layout, per projection), if stored so.
  void FusedExperts(const ArchTensorNames& nm, const LayerSpec& L, int64_t hidden,
                    std::map<size_t, std::vector<SourceTensor>>& at) {
    const int64_t l = L.index, E = L.ffn.moe.num_experts, ffn = L.ffn.moe.expert_ffn;
    const std::string gu = TensorName(nm.experts_gate_up, l), dn = TensorName(nm.experts_down, l);
    auto stored_as_fused = [&](const std::string& n) {
      return Has(n) || Has(n + std::string(kBlocks)) || Has(n + std::string(kScales)) ||
             Has(n + "_bias");
    };
    if (!stored_as_fused(gu) && !stored_as_fused(dn)) return;  // per-expert already
    std::vector<std::vector<SourceTensor>> per_expert(static_cast<size_t>(E));
    size_t first = SIZE_MAX;
    Projection(gu, E, hidden, 2 * ffn, {{nm.expert_gate, 2, 0}, {nm.expert_up, 2, 1}}, l,
               per_expert, first);
    Projection(dn, E, ffn, hidden, {{nm.expert_down, 1, 0}}, l, per_expert, first);
    std::vector<SourceTensor>& out = at[first];
    for (auto& e : per_expert) {
      // gate.weight, gate.bias, up.weight, up.bias, then down's: gate/up first in `e`.
      for (SourceTensor& s : e) out.push_back(std::move(s));
    }
  }

  const ModelConfig& config_;
  const std::vector<TensorInfo>& stored_;
  std::map<std::string, size_t> index_;
  std::set<size_t> consumed_;
};

}  // namespace

std::vector<SourceTensor> SourceTensors(const ModelConfig& config,
                                        const std::vector<TensorInfo>& stored) {
  return Builder(config, stored).Build();
}

std::vector<TensorInfo> SourceInfos(const std::vector<SourceTensor>& sources) {
  std::vector<TensorInfo> out;
  out.reserve(sources.size());
  for (const SourceTensor& s : sources) out.push_back(s.info);
  return out;
}

const SourceTensor* FirstDecodedSource(const std::vector<SourceTensor>& sources) {
  for (const SourceTensor& s : sources)
    if (s.kind == SourceTensor::Kind::kMxfp4Expert || s.kind == SourceTensor::Kind::kFp8Block)
      return &s;
  return nullptr;
}

SourceReader::SourceReader(std::vector<SourceTensor> sources, std::vector<TensorInfo> stored,
                           StoredRangeReader read)
    : sources_(std::move(sources)), stored_(std::move(stored)), read_(std::move(read)) {}

std::vector<uint8_t> SourceReader::Read(size_t i) const {
  const SourceTensor& t = sources_.at(i);
  if (t.kind == SourceTensor::Kind::kStored) {
    std::vector<uint8_t> b(t.info.nbytes);
    read_(t.stored, 0, b.size(), b.data());
    return b;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ == i) return cache_;
  return Compute(t);
}

void SourceReader::ReadRange(size_t i, uint64_t begin, uint64_t n, uint8_t* dst) const {
  const SourceTensor& t = sources_.at(i);
  TQ_CHECK(begin + n <= t.info.nbytes, kWhere, "read past tensor '{}'", t.info.name);
  if (t.kind == SourceTensor::Kind::kStored) return read_(t.stored, begin, n, dst);
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_ != i) {
    cached_ = SIZE_MAX;
    cache_ = Compute(t);
    cached_ = i;
  }
  std::memcpy(dst, cache_.data() + begin, size_t(n));
}

// Bytes of stored tensor `stored`'s expert `expert` (its leading index), kept for the next call.
const std::vector<uint8_t>& SourceReader::Slab(size_t stored, int64_t expert) const {
  if (slab_key_ != std::make_pair(stored, expert)) {
    const TensorInfo& s = stored_.at(stored);
    const uint64_t bytes = s.nbytes / uint64_t(s.shape.at(0));
    slab_key_ = {SIZE_MAX, -1};
    slab_.resize(bytes);
    read_(stored, uint64_t(expert) * bytes, bytes, slab_.data());
    slab_key_ = {stored, expert};
  }
  return slab_;
}

std::vector<uint8_t> SourceReader::Compute(const SourceTensor& t) const {
  std::vector<uint8_t> out(t.info.nbytes);
  const TensorInfo& src = stored_.at(t.stored);
  switch (t.kind) {
    case SourceTensor::Kind::kStored:
      read_(t.stored, 0, out.size(), out.data());
      break;
    case SourceTensor::Kind::kFusedExpert: {
      // Weight: src [E, in, W] -> out[o, i] = src[e, i, o·step + offset]; bias: src [E, W] ->
      // out[o] = src[e, o·step + offset]. Same dtype, element by element.
      const int64_t rows = t.info.shape[0], cols = t.bias ? 1 : t.info.shape[1];
      TransposeCopy(Slab(t.stored, t.expert).data(), src.shape.back(), t.step, t.offset, rows, cols,
                    DTypeSize(src.dtype), out.data());
      break;
    }
    case SourceTensor::Kind::kMxfp4Expert: {
      // blocks [E, W, G, 16], scales [E, W, G]: out row o = stored row o·step + offset, as bf16.
      const TensorInfo& sc = stored_.at(t.scales);
      const int64_t width = src.shape[1], groups = src.shape[2];
      const uint8_t* blocks = Slab(t.stored, t.expert).data();
      std::vector<uint8_t> scales(size_t(width * groups));
      read_(t.scales, uint64_t(t.expert * width * groups), scales.size(), scales.data());
      const int64_t rows = t.info.shape[0], cols = t.info.shape[1];
      std::vector<float> row(static_cast<size_t>(cols));
      uint16_t* dst = reinterpret_cast<uint16_t*>(out.data());
      for (int64_t o = 0; o < rows; ++o) {
        const int64_t r = o * t.step + t.offset;
        DequantizeMxfp4({blocks + r * groups * 16, size_t(groups * 16)},
                        {scales.data() + r * groups, size_t(groups)}, {groups, 16}, {groups},
                        src.name, row);
        for (int64_t i = 0; i < cols; ++i) {
          const float v = row[size_t(i)];
          const uint16_t b = F32ToBf16(v);
          TQ_CHECK(std::isfinite(v) && Bf16ToF32(b) == v, kWhere,
                   "MXFP4 tensor '{}' (scales '{}'), expert {} row {} column {}: the value {} is "
                   "not a finite bf16",
                   src.name, sc.name, t.expert, r, i, v);
          dst[o * cols + i] = b;
        }
      }
      break;
    }
    case SourceTensor::Kind::kFp8Block: {
      const TensorInfo& sc = stored_.at(t.scales);
      std::vector<uint8_t> w(src.nbytes), s_raw(sc.nbytes);
      read_(t.stored, 0, w.size(), w.data());
      read_(t.scales, 0, s_raw.size(), s_raw.data());
      std::vector<float> s(size_t(NumElements(sc.shape)));
      ToF32(TensorView{s_raw.data(), sc.dtype, sc.shape}, s.data());
      DequantizeFp8Block(w, s, src.shape, sc.shape, t.block_rows, t.block_cols, src.name,
                         {reinterpret_cast<float*>(out.data()), out.size() / 4});
      break;
    }
  }
  return out;
}

}  // namespace tq
