#include "model/linear.h"

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/packed_linear.h"

namespace tq {

DenseLinear::DenseLinear(TensorView weight, std::vector<float> bias)
    : weight_(std::move(weight)), bias_(std::move(bias)) {
  TQ_CHECK(weight_.rank() == 2, "linear", "weight must be 2-D, got {}",
           ShapeToString(weight_.shape));
  TQ_CHECK(bias_.empty() || int64_t(bias_.size()) == weight_.dim(0), "linear",
           "bias of {} for {} outputs", bias_.size(), weight_.dim(0));
}

void DenseLinear::MatMul(kernels::Backend& be, const float* x, int64_t n, float* y) const {
  be.MatMul(x, n, device_weight_, bias_data(), y);
}

void DenseLinear::Upload(kernels::Backend& be, std::string_view what) {
  buf_ = be.Upload(weight_.data, weight_.nbytes(), what);
  device_weight_ = weight_;
  device_weight_.data = buf_.data();
  bias_.Upload(be, what);
}

std::vector<Linear::StorageSpan> DenseLinear::StorageSpans() const {
  return {{weight_.data, weight_.nbytes()}};
}

void DenseLinear::UploadExceptStorage(kernels::Backend& be, std::string_view what) {
  device_weight_ = weight_;
  device_weight_.data = nullptr;  // streamed: OnStorage copies point at their slot
  bias_.Upload(be, what);
}

std::unique_ptr<Linear> DenseLinear::OnStorage(std::span<const void* const> at) const {
  TQ_CHECK(at.size() == 1 && at[0] != nullptr, "linear", "storage of {} spans for a dense linear",
           at.size());
  auto copy = std::make_unique<DenseLinear>(weight_);
  copy->device_weight_ = weight_;
  copy->device_weight_.data = at[0];
  copy->shared_bias_ = bias_data();
  return copy;
}

int64_t DenseLinear::WeightBytes() const {
  return int64_t(weight_.nbytes() + bias_.size() * sizeof(float));
}

void MatMulShared(kernels::Backend& be, std::span<const Linear* const> group, const float* x,
                  int64_t n, std::span<float* const> ys) {
  // Packed linears sharing one rotation: x is rotated once for the whole group.
  if (PackedMatMulShared(be, group, x, n, ys)) return;
  // Dense linears run as one kernel group (x read once, one parallel pass); anything else, one
  // by one.
  constexpr size_t kMaxGroup = 16;
  kernels::MatMulOutput outs[kMaxGroup];
  bool dense = group.size() <= kMaxGroup;
  for (size_t i = 0; dense && i < group.size(); ++i) {
    const DenseLinear* d = group[i]->AsDense();
    if (!d) {
      dense = false;
      break;
    }
    outs[i] = {&d->device_weight(), d->bias_data(), ys[i]};
  }
  if (dense) return be.MatMulGroup(x, n, {outs, group.size()});
  for (size_t i = 0; i < group.size(); ++i) group[i]->MatMul(be, x, n, ys[i]);
}

std::vector<float> LoadVector(const Checkpoint& ckpt, const std::string& name, int64_t size) {
  const TensorView t = ckpt.View(name);
  TQ_CHECK(t.rank() == 1 && t.dim(0) == size && IsFloat(t.dtype), "checkpoint " + ckpt.dir(),
           "tensor '{}' is {} {}, expected a float vector [{}]", name, DTypeName(t.dtype),
           ShapeToString(t.shape), size);
  std::vector<float> v(static_cast<size_t>(size));
  ToF32(t, v.data());
  return v;
}

std::unique_ptr<Linear> LoadLinear(const Checkpoint& ckpt, const std::string& prefix, int64_t out,
                                   int64_t in, bool bias, PackedCheckpointInfo* packed) {
  const std::string name = prefix + ".weight";
  if (!ckpt.Has(name) && ckpt.Has(prefix + ".codes")) {
    TQ_CHECK(packed != nullptr, "checkpoint " + ckpt.dir(),
             "'{}.codes' is a TurboQuant packed tensor but config.json has no quantization block",
             prefix);
    return LoadPackedLinear(ckpt, *packed, prefix, out, in, bias);
  }
  const TensorView w = ckpt.View(name);
  TQ_CHECK(w.rank() == 2 && w.dim(0) == out && w.dim(1) == in, "checkpoint " + ckpt.dir(),
           "tensor '{}' has shape {}, expected [{}, {}]", name, ShapeToString(w.shape), out, in);
  TQ_CHECK(w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16,
           "checkpoint " + ckpt.dir(), "tensor '{}' is {}, expected F32, F16 or BF16", name,
           DTypeName(w.dtype));
  std::vector<float> b;
  if (bias) b = LoadVector(ckpt, prefix + ".bias", out);
  return std::make_unique<DenseLinear>(w, std::move(b));
}

std::unique_ptr<Linear> LoadLinearRows(const Checkpoint& ckpt, const std::string& prefix,
                                       int64_t total, int64_t row0, int64_t rows, int64_t in,
                                       bool bias, PackedCheckpointInfo* packed) {
  const std::string name = prefix + ".weight", where = "checkpoint " + ckpt.dir();
  TQ_CHECK(row0 >= 0 && rows > 0 && row0 + rows <= total, where, "rows {}..{} of '{}' ({} rows)",
           row0, row0 + rows, name, total);
  auto bias_rows = [&] {
    std::vector<float> b;
    if (bias) {
      const std::vector<float> all = LoadVector(ckpt, prefix + ".bias", total);
      b.assign(all.begin() + row0, all.begin() + row0 + rows);
    }
    return b;
  };
  if (!ckpt.Has(name) && ckpt.Has(prefix + ".codes")) {  // packed: rows are packed on their own
    const std::unique_ptr<Linear> full = LoadLinear(ckpt, prefix, total, in, false, packed);
    return SlicePackedRows(*full->AsPacked(), row0, rows, bias_rows());
  }
  TensorView w = ckpt.View(name);
  TQ_CHECK(w.rank() == 2 && w.dim(0) == total && w.dim(1) == in, where,
           "tensor '{}' has shape {}, expected [{}, {}]", name, ShapeToString(w.shape), total, in);
  TQ_CHECK(w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16, where,
           "tensor '{}' is {}, expected F32, F16 or BF16", name, DTypeName(w.dtype));
  w.data = w.bytes() + size_t(row0 * in) * DTypeSize(w.dtype);
  w.shape = {rows, in};
  return std::make_unique<DenseLinear>(w, bias_rows());
}

}  // namespace tq
