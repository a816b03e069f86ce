#include "model/packed_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "quant/codebook.h"
#include "quant/e8_scales.h"
#include "quant/format.h"
#include "quant/hadamard_blocks.h"
#include "quant/packing.h"

namespace tq {
namespace {

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

std::shared_ptr<const quant::HadamardRotation> LoadRotation(const Checkpoint& ckpt,
                                                            PackedCheckpointInfo& info,
                                                            const std::string& group,
                                                            const std::string& user, int64_t in) {
  const std::string where = "checkpoint " + ckpt.dir();
  auto it = info.rotations.find(group);
  if (it == info.rotations.end()) {
    const std::string name = group + ".signs";
    TQ_CHECK(ckpt.Has(name), where,
             "missing tensor '{}' (the signs of rotation group '{}' of '{}')", name, group, user);
    const TensorView s = ckpt.View(name);
    TQ_CHECK(s.dtype == DType::U8 && s.rank() == 2 && s.dim(0) > 0 && s.dim(1) > 0, where,
             "tensor '{}' is {} {}, expected U8 [in / block, block / 8]", name, DTypeName(s.dtype),
             ShapeToString(s.shape));
    const int64_t block = s.dim(1) * 8, dim = s.dim(0) * block;
    TQ_CHECK(quant::IsHadamardBlock(block), where,
             "tensor '{}': Hadamard block {} (8 x {}) is not m x 2^k with m in {{1, 12, 20, 28}}",
             name, block, s.dim(1));
    quant::HadamardSigns signs;
    try {
      signs = quant::HadamardSigns::FromBits({s.bytes(), s.nbytes()}, dim);
    } catch (const Error& e) {
      Fail(where, "tensor '{}': {}", name, e.what());
    }
    it = info.rotations
             .emplace(group, std::make_shared<quant::HadamardRotation>(std::move(signs), block))
             .first;
  }
  TQ_CHECK(it->second->dim() == in, where,
           "rotation group '{}' has {} signs but '{}' has {} input features", group,
           it->second->dim(), user, in);
  return it->second;
}

}  // namespace

std::optional<PackedCheckpointInfo> ParseQuantizationBlock(const std::string& config_json,
                                                           const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const std::exception& e) {
    Fail(where, "invalid JSON: {}", e.what());
  }
  if (!j.is_object() || !j.contains("quantization")) return std::nullopt;
  const nlohmann::json& q = j["quantization"];
  TQ_CHECK(q.is_object(), where, "'quantization' must be an object");
  TQ_CHECK(q.contains("mode") && q["mode"].is_string() && q["mode"] == "turboquant", where,
           "quantization.mode must be \"turboquant\" (got {})",
           q.contains("mode") ? q["mode"].dump() : "nothing");
  TQ_CHECK(q.contains("format_version") && q["format_version"].is_number_integer(), where,
           "quantization.format_version is missing or not an integer");
  PackedCheckpointInfo info;
  info.format_version = q["format_version"].get<int>();
  TQ_CHECK(info.format_version >= kOldestPackedFormatVersion &&
               info.format_version <= kPackedFormatVersion,
           where,
           "quantization.format_version {} is not supported (this build reads versions {}-{})",
           info.format_version, kOldestPackedFormatVersion, kPackedFormatVersion);
  TQ_CHECK(q.contains("tensors") && q["tensors"].is_object(), where,
           "quantization.tensors is missing or not an object");
  for (const auto& [name, t] : q["tensors"].items()) {
    TQ_CHECK(t.is_object(), where, "quantization.tensors.{} must be an object", name);
    std::string group;
    if (t.contains("rotation_group") && !t["rotation_group"].is_null()) {
      TQ_CHECK(t["rotation_group"].is_string(), where,
               "quantization.tensors.{}.rotation_group must be a string or null", name);
      group = t["rotation_group"].get<std::string>();
    }
    info.rotation_group[name] = group;
    std::string table = name + ".scale_table";
    if (t.contains("scale_table")) {
      TQ_CHECK(t["scale_table"].is_string() && !t["scale_table"].get<std::string>().empty(), where,
               "quantization.tensors.{}.scale_table must be a tensor name", name);
      table = t["scale_table"].get<std::string>();
    }
    info.scale_table[name] = table;
  }
  return info;
}

PackedLinear::PackedLinear(kernels::PackedMatrix w, std::vector<float> codebook,
                           std::shared_ptr<const quant::HadamardRotation> rotation,
                           std::vector<float> bias,
                           std::shared_ptr<const std::vector<float>> scale_table)
    : w_(w),
      codebook_(std::move(codebook)),
      scale_table_(std::move(scale_table)),
      rotation_(std::move(rotation)),
      bias_(std::move(bias)) {
  if (w_.method == quant::QuantMethod::kCodebook) w_.codebook = codebook_.data();
  w_.linear_q8_step = 0.0f;
  if (w_.codebook && w_.format == quant::CodeFormat::kQ8 && codebook_.size() == 256 &&
      quant::IsLinearQ8Levels(codebook_.data()))
    w_.linear_q8_step = codebook_[129];
  if (w_.scale_codes) {
    TQ_CHECK(scale_table_ != nullptr, "packed linear", "e8 scale codes without a table");
    quant::ValidateE8ScaleTable(scale_table_->data(), int64_t(scale_table_->size()),
                                "packed linear");
    w_.scale_table = scale_table_->data();
  }
  kernels::CheckPackedMatrix(w_, "packed linear");
  TQ_CHECK(bias_.empty() || int64_t(bias_.size()) == w_.rows, "packed linear",
           "bias of {} for {} outputs", bias_.size(), w_.rows);
  TQ_CHECK(!rotation_ || rotation_->dim() == w_.cols, "packed linear",
           "rotation of {} for {} inputs", rotation_ ? rotation_->dim() : 0, w_.cols);
}

void PackedLinear::MatMul(kernels::Backend& be, const float* x, int64_t n, float* y) const {
  if (!rotation_) return MatMulRotated(be, x, n, y);
  const kernels::PackedMatMulOutput out{&dw_, bias_device(), y};
  be.RotatedPackedMatMulGroup(rotation_view_, x, n, {&out, 1});
}

void PackedLinear::MatMulRotated(kernels::Backend& be, const float* xr, int64_t n, float* y) const {
  if (n > 0) be.PackedMatMul(xr, n, dw_, bias_device(), y);
}

void PackedLinear::UploadParts(kernels::Backend& be, std::string_view what, bool storage) {
  const int64_t groups = w_.rows * (w_.cols / w_.group_size);
  dw_ = w_;
  // The storage (codes, scales, minimums): null when streamed (OnStorage copies point at a slot).
  dw_.codes = nullptr;
  dw_.scales = nullptr;
  dw_.scale_codes = nullptr;
  dw_.mins = nullptr;
  if (storage) {
    codes_buf_ = be.Upload(w_.codes, size_t(w_.rows * w_.row_bytes), what);
    dw_.codes = codes_buf_.as<const uint8_t>();
    if (w_.scale_codes) {
      scales_buf_ = be.Upload(w_.scale_codes, size_t(groups), what);
      dw_.scale_codes = scales_buf_.as<const uint8_t>();
    } else {
      scales_buf_ = be.Upload(w_.scales, size_t(groups) * sizeof(uint16_t), what);
      dw_.scales = scales_buf_.as<const uint16_t>();
    }
    if (w_.mins) {
      mins_buf_ = be.Upload(w_.mins, size_t(groups) * sizeof(uint16_t), what);
      dw_.mins = mins_buf_.as<const uint16_t>();
    }
  }
  if (w_.scale_codes) {
    table_buf_ = be.Upload(w_.scale_table, size_t(quant::kE8TableSize) * sizeof(float), what);
    dw_.scale_table = table_buf_.as<const float>();
  }
  if (w_.codebook) {
    codebook_buf_ = be.Upload(codebook_.data(), codebook_.size() * sizeof(float), what);
    dw_.codebook = codebook_buf_.as<const float>();
  }
  if (rotation_) {
    signs_buf_ = be.Upload(rotation_->signs().data(), size_t(rotation_->dim()), what);
    rotation_view_ = {signs_buf_.as<const int8_t>(), rotation_->dim(), rotation_->block()};
  }
  bias_.Upload(be, what);
}

void PackedLinear::UploadExceptStorage(kernels::Backend& be, std::string_view what) {
  UploadParts(be, what, false);
}

std::vector<Linear::StorageSpan> PackedLinear::StorageSpans() const {
  const size_t groups = size_t(w_.rows * (w_.cols / w_.group_size));
  std::vector<StorageSpan> s = {{w_.codes, size_t(w_.rows * w_.row_bytes)}};
  if (w_.scale_codes) {
    s.push_back({w_.scale_codes, groups});
  } else {
    s.push_back({w_.scales, groups * sizeof(uint16_t)});
  }
  if (w_.mins) s.push_back({w_.mins, groups * sizeof(uint16_t)});
  return s;
}

std::unique_ptr<Linear> PackedLinear::OnStorage(std::span<const void* const> at) const {
  const size_t spans = w_.mins ? 3 : 2;
  TQ_CHECK(at.size() == spans, "packed linear", "storage of {} spans, expected {}", at.size(),
           spans);
  for (const void* p : at) TQ_CHECK(p != nullptr, "packed linear", "null storage span");
  // Not the public constructor: nothing is revalidated or copied (this linear was checked).
  std::unique_ptr<PackedLinear> c(new PackedLinear());
  c->w_ = w_;
  c->dw_ = dw_;
  c->dw_.codes = static_cast<const uint8_t*>(at[0]);
  if (w_.scale_codes) {
    c->dw_.scale_codes = static_cast<const uint8_t*>(at[1]);
  } else {
    c->dw_.scales = static_cast<const uint16_t*>(at[1]);
  }
  if (w_.mins) c->dw_.mins = static_cast<const uint16_t*>(at[2]);
  c->scale_table_ = scale_table_;
  c->rotation_ = rotation_;  // the same object: MatMulShared still rotates gate/up input once
  c->rotation_view_ = rotation_view_;
  c->shared_bias_ = bias_device();
  return c;
}

void PackedLinear::ShareUpload(const PackedLinear& other) {
  TQ_CHECK(other.w_.rows == w_.rows && other.w_.cols == w_.cols && other.w_.format == w_.format,
           "packed linear", "cannot share the device copy of a [{}, {}] matrix with [{}, {}]",
           other.w_.rows, other.w_.cols, w_.rows, w_.cols);
  dw_ = other.dw_;
}

void PackedLinear::DequantizeRows(int64_t r0, int64_t count, float* out) const {
  TQ_CHECK(r0 >= 0 && count >= 0 && r0 + count <= w_.rows, "packed linear", "rows {}..{} of {}", r0,
           r0 + count, w_.rows);
  kernels::PackedDequantizeRows(w_, r0, count, out);
}

int64_t PackedLinear::WeightBytes() const {
  const int64_t groups = w_.rows * (w_.cols / w_.group_size);
  // An e8 table shared by a rotation group is counted with each of its linears (an upper bound).
  const int64_t scale_bytes =
      w_.scale_codes ? groups + quant::kE8TableSize * 4 : groups * 2 * (w_.mins ? 2 : 1);
  return w_.rows * w_.row_bytes + scale_bytes +
         int64_t((codebook_.size() + bias_.size()) * sizeof(float));
}

bool PackedMatMulShared(kernels::Backend& be, std::span<const Linear* const> group, const float* x,
                        int64_t n, std::span<float* const> ys) {
  if (group.size() < 2) return false;
  const quant::HadamardRotation* rot = nullptr;
  for (size_t i = 0; i < group.size(); ++i) {
    const PackedLinear* p = group[i]->AsPacked();
    if (!p || !p->rotation() || (i > 0 && p->rotation() != rot)) return false;
    rot = p->rotation();
  }
  const PackedLinear* first = group[0]->AsPacked();
  constexpr size_t kMaxGroup = 16;
  if (group.size() > kMaxGroup) {
    float* xr = be.RotationScratch(n * rot->dim());
    be.Rotate(first->rotation_view(), x, n, xr);  // once for the whole group
    for (size_t i = 0; i < group.size(); ++i) group[i]->AsPacked()->MatMulRotated(be, xr, n, ys[i]);
    return true;
  }
  kernels::PackedMatMulOutput outs[kMaxGroup];
  for (size_t i = 0; i < group.size(); ++i) {
    const PackedLinear* p = group[i]->AsPacked();
    outs[i] = {&p->device_matrix(), p->bias_device(), ys[i]};
  }
  // One rotation for the whole group (inside the product's launch on cuda, one token).
  be.RotatedPackedMatMulGroup(first->rotation_view(), x, n, {outs, group.size()});
  return true;
}

std::unique_ptr<PackedLinear> LoadPackedLinear(const Checkpoint& ckpt, PackedCheckpointInfo& info,
                                               const std::string& prefix, int64_t out, int64_t in,
                                               bool bias) {
  const std::string where = "checkpoint " + ckpt.dir();
  const std::string codes_name = prefix + ".codes", scales_name = prefix + ".scales";
  const std::string mins_name = prefix + ".mins", cb_name = prefix + ".codebook";
  TQ_CHECK(ckpt.Has(codes_name), where, "missing tensor '{}'", codes_name);
  TQ_CHECK(ckpt.Has(scales_name), where, "missing tensor '{}' (the group scales of '{}')",
           scales_name, codes_name);
  const TensorView codes = ckpt.View(codes_name), scales = ckpt.View(scales_name);
  TQ_CHECK(codes.dtype == DType::U8 && codes.rank() == 2 && codes.dim(0) == out, where,
           "tensor '{}' is {} {}, expected U8 [{}, bytes per row]", codes_name,
           DTypeName(codes.dtype), ShapeToString(codes.shape), out);
  const bool e8 = scales.dtype == DType::U8;  // e8 scales: a byte per group + a table
  TQ_CHECK((scales.dtype == DType::F16 || e8) && scales.rank() == 2 && scales.dim(0) == out &&
               scales.dim(1) > 0 && in % scales.dim(1) == 0,
           where,
           "tensor '{}' is {} {}, expected F16 or U8 (e8) [{}, groups] with groups dividing {}",
           scales_name, DTypeName(scales.dtype), ShapeToString(scales.shape), out, in);
  TQ_CHECK(e8 || Aligned(scales.data, 2), where, "tensor '{}' is not 2-byte aligned", scales_name);

  kernels::PackedMatrix w;
  w.rows = out;
  w.cols = in;
  w.group_size = in / scales.dim(1);
  w.codes = codes.bytes();
  const auto named = info.scale_table.find(prefix);
  const std::string table_name =
      named != info.scale_table.end() ? named->second : prefix + ".scale_table";
  std::shared_ptr<const std::vector<float>> scale_table;
  if (e8) {
    TQ_CHECK(info.format_version >= 2, where,
             "tensor '{}' holds e8 scales (U8), which need quantization.format_version >= 2 (the "
             "file says {})",
             scales_name, info.format_version);
    auto it = info.tables.find(table_name);
    if (it == info.tables.end()) {
      TQ_CHECK(ckpt.Has(table_name), where, "missing tensor '{}' (the table of the e8 scales '{}')",
               table_name, scales_name);
      const TensorView t = ckpt.View(table_name);
      TQ_CHECK(t.dtype == DType::F32 && t.rank() == 1 && t.dim(0) == quant::kE8TableSize, where,
               "tensor '{}' is {} {}, expected F32 [{}]", table_name, DTypeName(t.dtype),
               ShapeToString(t.shape), quant::kE8TableSize);
      std::vector<float> values(size_t(quant::kE8TableSize));
      std::memcpy(values.data(), t.data, t.nbytes());
      quant::ValidateE8ScaleTable(values.data(), int64_t(values.size()),
                                  fmt::format("{}: tensor '{}'", where, table_name));
      it = info.tables
               .emplace(table_name, std::make_shared<const std::vector<float>>(std::move(values)))
               .first;
    }
    scale_table = it->second;
    w.scale_codes = scales.bytes();
  } else {
    TQ_CHECK(!ckpt.Has(prefix + ".scale_table"), where,
             "tensor '{}.scale_table' with fp16 scales '{}' (e8 scales are U8)", prefix,
             scales_name);
    w.scales = scales.as<uint16_t>();
  }
  std::vector<float> codebook;
  const bool has_mins = ckpt.Has(mins_name), has_cb = ckpt.Has(cb_name);
  TQ_CHECK(has_mins != has_cb, where,
           "'{}' needs exactly one of '{}' (codebook method) and '{}' (affine method)", codes_name,
           cb_name, mins_name);
  TQ_CHECK(!e8 || has_cb, where, "'{}': e8 scales need the codebook method, not affine '{}'",
           scales_name, mins_name);
  if (has_cb) {
    const TensorView cb = ckpt.View(cb_name);
    TQ_CHECK(cb.dtype == DType::F32 && cb.rank() == 1, where,
             "tensor '{}' is {} {}, expected F32 [levels]", cb_name, DTypeName(cb.dtype),
             ShapeToString(cb.shape));
    const auto f = quant::FormatForLevels(int(cb.dim(0)));
    TQ_CHECK(f.has_value(), where,
             "tensor '{}' has {} levels: no code format has that many (2, 3, 4, 8, 16, 256)",
             cb_name, cb.dim(0));
    w.method = quant::QuantMethod::kCodebook;
    w.format = *f;
    codebook.resize(size_t(cb.dim(0)));
    std::memcpy(codebook.data(), cb.data, cb.nbytes());
    for (float v : codebook)
      TQ_CHECK(std::isfinite(v), where, "tensor '{}' has a non-finite level", cb_name);
  } else {
    const TensorView mins = ckpt.View(mins_name);
    TQ_CHECK(mins.dtype == DType::F16 && mins.shape == scales.shape, where,
             "tensor '{}' is {} {}, expected F16 {}", mins_name, DTypeName(mins.dtype),
             ShapeToString(mins.shape), ShapeToString(scales.shape));
    TQ_CHECK(Aligned(mins.data, 2), where, "tensor '{}' is not 2-byte aligned", mins_name);
    w.method = quant::QuantMethod::kAffine;
    w.mins = mins.as<uint16_t>();
    bool found = false;
    for (quant::CodeFormat f : {quant::CodeFormat::kQ2, quant::CodeFormat::kQ3,
                                quant::CodeFormat::kQ4, quant::CodeFormat::kQ8}) {
      if (int64_t(quant::PackedBytes(f, in)) == codes.dim(1)) {
        w.format = f;
        found = true;
      }
    }
    TQ_CHECK(found, where, "tensor '{}': {} bytes per row of {} codes is no affine code width",
             codes_name, codes.dim(1), in);
  }
  w.row_bytes = int64_t(quant::PackedBytes(w.format, in));
  TQ_CHECK(codes.dim(1) == w.row_bytes, where,
           "tensor '{}' has shape {}, expected [{}, {}] for {} {} codes per row", codes_name,
           ShapeToString(codes.shape), out, w.row_bytes, in, quant::Traits(w.format).name);

  auto it = info.rotation_group.find(prefix);
  TQ_CHECK(it != info.rotation_group.end(), where,
           "'{}' is packed but config.json quantization.tensors has no entry '{}'", codes_name,
           prefix);
  std::shared_ptr<const quant::HadamardRotation> rotation;
  if (!it->second.empty()) rotation = LoadRotation(ckpt, info, it->second, prefix, in);
  std::vector<float> b;
  if (bias) b = LoadVector(ckpt, prefix + ".bias", out);
  return std::make_unique<PackedLinear>(w, std::move(codebook), std::move(rotation), std::move(b),
                                        std::move(scale_table));
}

std::unique_ptr<PackedLinear> SlicePackedRows(const PackedLinear& full, int64_t row0, int64_t rows,
                                              std::vector<float> bias) {
  kernels::PackedMatrix w = full.matrix();
  TQ_CHECK(row0 >= 0 && rows > 0 && row0 + rows <= w.rows, "packed linear",
           "rows {}..{} of a {}-row matrix", row0, row0 + rows, w.rows);
  const int64_t groups = w.cols / w.group_size;
  w.rows = rows;
  w.codes += row0 * w.row_bytes;
  if (w.scales) w.scales += row0 * groups;
  if (w.scale_codes) w.scale_codes += row0 * groups;
  if (w.mins) w.mins += row0 * groups;
  std::vector<float> codebook;
  if (w.method == quant::QuantMethod::kCodebook)
    codebook.assign(w.codebook, w.codebook + quant::Traits(w.format).levels);
  std::shared_ptr<const std::vector<float>> table;
  if (w.scale_codes)
    table = std::make_shared<const std::vector<float>>(w.scale_table,
                                                       w.scale_table + quant::kE8TableSize);
  // The rotation object is shared (not copied): MatMulShared rotates once for the slices.
  std::shared_ptr<const quant::HadamardRotation> rotation = full.shared_rotation();
  return std::make_unique<PackedLinear>(w, std::move(codebook), std::move(rotation),
                                        std::move(bias), std::move(table));
}

}  // namespace tq
