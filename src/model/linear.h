// A linear layer y = x·Wᵀ + b as the forward pass sees it. The forward pass only calls MatMul
// (or MatMulShared for linears that read the same input) on the model's Backend, so other weight
// formats — TurboQuant packed codes (PackedLinear: the input is rotated once per sharing group),
// streamed experts — are new subclasses plus a case in LoadLinear, not changes to forward.cc.
// A linear is loaded as views of the checkpoint (host) and then Upload()ed once to the backend
// that runs it (host backends keep the views: no copy).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/param.h"

namespace tq {

class Checkpoint;
class DenseLinear;
class PackedLinear;
struct PackedCheckpointInfo;

class Linear {
 public:
  virtual ~Linear() = default;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  // y [n, out] = x [n, in] · Wᵀ (+ bias) on `be` (x and y in its memory; the weights uploaded
  // to it). y must not alias x.
  virtual void MatMul(kernels::Backend& be, const float* x, int64_t n, float* y) const = 0;
  // Bytes of weight data as loaded (mmapped or owned).
  virtual int64_t WeightBytes() const = 0;
  // Places the weights in the backend's memory (once, before the first MatMul).
  virtual void Upload(kernels::Backend& be, std::string_view what) = 0;
  virtual const DenseLinear* AsDense() const { return nullptr; }
  virtual const PackedLinear* AsPacked() const { return nullptr; }

  // Streaming (model/expert_cache.h): the large tensors of this linear as host views into the
  // checkpoint (dense: the weight; packed: codes, scales, minimums), in a fixed order.
  struct StorageSpan {
    const void* host;
    size_t bytes;
  };
  virtual std::vector<StorageSpan> StorageSpans() const = 0;
  // Upload() of everything but the storage spans (codebook, scale table, signs, bias): what a
  // streamed linear keeps resident.
  virtual void UploadExceptStorage(kernels::Backend& be, std::string_view what) = 0;
  // A linear computing exactly what this one computes, whose storage spans are at `at` (the
  // backend's memory, one pointer per StorageSpans() entry holding the same bytes) and sharing
  // everything else with this one (which must outlive it and have been uploaded, whole or
  // UploadExceptStorage).
  virtual std::unique_ptr<Linear> OnStorage(std::span<const void* const> at) const = 0;
};

// Weights as stored in the checkpoint ([out, in] F32/F16/BF16, mmapped); bias kept in fp32.
class DenseLinear final : public Linear {
 public:
  DenseLinear(TensorView weight, std::vector<float> bias = {});
  int64_t in_features() const override { return weight_.dim(1); }
  int64_t out_features() const override { return weight_.dim(0); }
  void MatMul(kernels::Backend& be, const float* x, int64_t n, float* y) const override;
  int64_t WeightBytes() const override;
  void Upload(kernels::Backend& be, std::string_view what) override;
  const DenseLinear* AsDense() const override { return this; }
  std::vector<StorageSpan> StorageSpans() const override;
  void UploadExceptStorage(kernels::Backend& be, std::string_view what) override;
  std::unique_ptr<Linear> OnStorage(std::span<const void* const> at) const override;
  // The weight as loaded (host) and as the backend sees it (after Upload).
  const TensorView& weight() const { return weight_; }
  const TensorView& device_weight() const { return device_weight_; }
  const float* bias_data() const { return bias_.empty() ? shared_bias_ : bias_.data(); }

 private:
  const float* shared_bias_ = nullptr;  // OnStorage copies: the original's bias (backend memory)
  TensorView weight_;
  TensorView device_weight_;
  DeviceBuffer buf_;
  FloatParam bias_;
};

// Runs several linears over one input x [n, in] (q/k/v; gate/up; one projection of the experts):
// ys[i] = group[i]·x. The seam where a packed format rotates x once for the whole group.
void MatMulShared(kernels::Backend& be, std::span<const Linear* const> group, const float* x,
                  int64_t n, std::span<float* const> ys);

// Loads the linear `<prefix>.weight` (+ `<prefix>.bias` when `bias`), checking its shape is
// [out, in]; with `packed` (a TurboQuant checkpoint, packed_linear.h) a linear stored as
// `<prefix>.codes` ... loads as a PackedLinear. Errors name the tensor.
std::unique_ptr<Linear> LoadLinear(const Checkpoint& ckpt, const std::string& prefix, int64_t out,
                                   int64_t in, bool bias, PackedCheckpointInfo* packed = nullptr);

// Rows [row0, row0 + rows) of the fused linear `<prefix>` ([total, in]: phi3's qkv_proj and
// gate_up_proj) as a linear of its own: a view of the checkpoint's rows (and bias), no copy;
// packed (TurboQuant) rows likewise (SlicePackedRows).
std::unique_ptr<Linear> LoadLinearRows(const Checkpoint& ckpt, const std::string& prefix,
                                       int64_t total, int64_t row0, int64_t rows, int64_t in,
                                       bool bias, PackedCheckpointInfo* packed = nullptr);

// A float vector tensor (norm weights, biases) of `size` elements as fp32; errors name it.
std::vector<float> LoadVector(const Checkpoint& ckpt, const std::string& name, int64_t size);

}  // namespace tq
