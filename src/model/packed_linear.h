// TurboQuant packed linears (docs/FORMAT.md): W' = W·Rᵀ stored as codes + group scales (fp16, or
// e8: a byte per group + a per-tensor table) + a codebook (or the affine baseline's scales +
// minimums), plus one Hadamard sign vector per group of linears that read the same input. y = W'·(R
// x): the input is rotated once per sharing group (MatMulShared) and the weights are never
// un-rotated.
//
// The loader reads each tensor's format from the tensors themselves: the codebook's length gives
// the code format (2/3/4/8/16/256 levels; 3 = ternary), the affine method's code width comes from
// the codes' row length; config.json's `quantization` block names each linear's rotation group.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/packed_ops.h"
#include "model/linear.h"
#include "quant/hadamard.h"

namespace tq {

class Checkpoint;

// Version 2 adds e8 group scales (U8 `.scales` + `.scale_table`); version 1 files still load.
inline constexpr int kPackedFormatVersion = 2;
inline constexpr int kOldestPackedFormatVersion = 1;

// config.json's `quantization` block as the loader needs it.
struct PackedCheckpointInfo {
  int format_version = 0;
  // Module prefix of every quantized tensor ("model.layers.0.self_attn.q_proj") -> the name of its
  // rotation group ("model.layers.0.attn_in"; empty: not rotated). Its signs are
  // "<group>.signs".
  std::map<std::string, std::string> rotation_group;
  // Rotations loaded so far, by group (shared by the group's linears).
  std::map<std::string, std::shared_ptr<const quant::HadamardRotation>> rotations;
  // Module prefix -> the name of its e8 scale table (quantization.tensors.<p>.scale_table; absent:
  // "<p>.scale_table"), and the tables loaded so far by name (shared by the linears naming them).
  std::map<std::string, std::string> scale_table;
  std::map<std::string, std::shared_ptr<const std::vector<float>>> tables;
};

// Parses the `quantization` block of config.json text; nullopt when there is none. Throws
// tq::Error naming `where` on an unknown mode or format_version or a malformed block.
std::optional<PackedCheckpointInfo> ParseQuantizationBlock(const std::string& config_json,
                                                           const std::string& where);

class PackedLinear final : public Linear {
 public:
  // `codebook` backs w.codebook (moved in) and `scale_table` (null: fp16 scales; else 256 values)
  // w.scale_table; `rotation` may be null (not rotated).
  PackedLinear(kernels::PackedMatrix w, std::vector<float> codebook,
               std::shared_ptr<const quant::HadamardRotation> rotation, std::vector<float> bias,
               std::shared_ptr<const std::vector<float>> scale_table = nullptr);
  int64_t in_features() const override { return w_.cols; }
  int64_t out_features() const override { return w_.rows; }
  void MatMul(kernels::Backend& be, const float* x, int64_t n, float* y) const override;
  int64_t WeightBytes() const override;
  // Codes, scales (+ table), minimums, codebook, bias and the rotation's signs into the backend's
  // memory, packed as stored (host backends: views, nothing copied).
  void Upload(kernels::Backend& be, std::string_view what) override { UploadParts(be, what, true); }
  // Uses `other`'s backend copy (the same tensors: a tied embedding and LM head).
  void ShareUpload(const PackedLinear& other);
  const PackedLinear* AsPacked() const override { return this; }
  // Streaming: codes, then scales (fp16 or e8 codes), then minimums (affine).
  std::vector<StorageSpan> StorageSpans() const override;
  void UploadExceptStorage(kernels::Backend& be, std::string_view what) override;
  std::unique_ptr<Linear> OnStorage(std::span<const void* const> at) const override;

  // y [n, out] = x' [n, in] · Ŵ'ᵀ (+ bias) on `be`, x' already rotated by rotation().
  void MatMulRotated(kernels::Backend& be, const float* xr, int64_t n, float* y) const;
  const quant::HadamardRotation* rotation() const { return rotation_.get(); }
  const std::shared_ptr<const quant::HadamardRotation>& shared_rotation() const {
    return rotation_;
  }
  // The rotation as the backend sees it (after Upload); dim 0 when not rotated.
  const kernels::RotationView& rotation_view() const { return rotation_view_; }
  // The matrix as loaded (host views) and as the backend sees it (after Upload).
  const kernels::PackedMatrix& matrix() const { return w_; }
  const kernels::PackedMatrix& device_matrix() const { return dw_; }
  const float* device_bias() const { return bias_device(); }  // [out] or null, after Upload
  // out [count, in] = rows r0.. of the dequantized (still rotated) weights, on the host.
  void DequantizeRows(int64_t r0, int64_t count, float* out) const;

 private:
  PackedLinear() = default;  // OnStorage
  void UploadParts(kernels::Backend& be, std::string_view what, bool storage);
  const float* bias_device() const { return bias_.empty() ? shared_bias_ : bias_.data(); }

  const float* shared_bias_ = nullptr;  // OnStorage copies: the original's bias (backend memory)
  kernels::PackedMatrix w_;   // host views (mmapped codes and scales; our codebook / table)
  kernels::PackedMatrix dw_;  // the same matrix in the backend's memory
  std::vector<float> codebook_;
  std::shared_ptr<const std::vector<float>> scale_table_;  // [256] with e8 scales (shared)
  std::shared_ptr<const quant::HadamardRotation> rotation_;
  kernels::RotationView rotation_view_;
  FloatParam bias_;
  // The backend's copies (views on host backends).
  DeviceBuffer codes_buf_, scales_buf_, mins_buf_, codebook_buf_, table_buf_, signs_buf_;
};

// Rows [row0, row0 + rows) of `full` as a packed linear of its own (phi3's fused qkv_proj and
// gate_up_proj): rows are packed independently, so this is a view of the same codes and scales,
// with the same rotation (the slices of one tensor share one rotation of the input).
std::unique_ptr<PackedLinear> SlicePackedRows(const PackedLinear& full, int64_t row0, int64_t rows,
                                              std::vector<float> bias);

// Loads the packed linear with module prefix `prefix` of shape [out, in]; every tensor's dtype
// and shape is checked and errors name the tensor. `bias`: "<prefix>.bias" is read too.
std::unique_ptr<PackedLinear> LoadPackedLinear(const Checkpoint& ckpt, PackedCheckpointInfo& info,
                                               const std::string& prefix, int64_t out, int64_t in,
                                               bool bias);

// MatMulShared for a group of PackedLinears with one rotation: rotates x once. Returns false
// (doing nothing) when the group is not such a group.
bool PackedMatMulShared(kernels::Backend& be, std::span<const Linear* const> group, const float* x,
                        int64_t n, std::span<float* const> ys);

}  // namespace tq
