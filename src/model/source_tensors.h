// The tensors a conversion reads (convert, and plan's projection of one): a checkpoint's stored
// tensors as float matrices and vectors in the layout the loader reads without rearranging. Each
// stored tensor is itself, except
//  - gpt_oss's experts as published in bf16: "<x>.gate_up_proj" [E, hidden, 2·ffn] (gate and up
//    interleaved along the last axis: gate = [..., 0::2], up = [..., 1::2]), "<x>.down_proj"
//    [E, ffn, hidden] (y = x · W + b), biases "<x>.gate_up_proj_bias" [E, 2·ffn] and
//    "<x>.down_proj_bias" [E, hidden]: one [out, in] linear and bias [out] per expert and
//    projection at the per-expert names (ExpertLayout::kPerExpert, "<x>.E.gate_proj.weight"), in
//    the stored dtype;
//  - the same experts as published in MXFP4: "<x>.gate_up_proj_blocks" U8 [E, 2·ffn, hidden/32,
//    16] + "<x>.gate_up_proj_scales" U8 [E, 2·ffn, hidden/32] (rows in [out, in] order, gate and
//    up rows interleaved), "<x>.down_proj_blocks" [E, hidden, ffn/32, 16] + "_scales": the same
//    linears as BF16 (e2m1 · 2^k is exact in bf16; a value that is not is an error);
//  - FP8 E4M3 weights with block scales (DeepSeek-V3): "<p>.weight" F8_E4M3 [out, in] with
//    "<p>.weight_scale_inv" F32 [⌈out/b⌉, ⌈in/b⌉] (b from config.json's
//    quantization_config.weight_block_size, default [128, 128]): "<p>.weight" F32, the scales
//    consumed.
// A layer's per-expert tensors stand where its first fused tensor stood, expert by expert (gate,
// up, down with their biases), so each expert's projections lie together in the output. Every
// inconsistency (a missing "_scales" or bias, shapes that do not match config.json, a stray
// "weight_scale_inv") is a tq::Error naming the stored tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace tq {

struct ModelConfig;

struct SourceTensor {
  enum class Kind : uint8_t {
    kStored,       // the stored tensor itself
    kFusedExpert,  // one expert's projection (or bias) of a fused bf16 tensor
    kMxfp4Expert,  // one expert's projection decoded from an MXFP4 pair
    kFp8Block,     // an FP8 weight times its block scales
  };
  // The tensor as a conversion sees it: name, dtype, shape, nbytes (offset and shard only for
  // kStored).
  TensorInfo info;
  Kind kind = Kind::kStored;
  size_t stored = 0;  // the stored tensor it comes from (kMxfp4Expert: the blocks)
  size_t scales = 0;  // kMxfp4Expert: the "_scales"; kFp8Block: the "weight_scale_inv"
  int64_t expert = -1;
  // kFusedExpert / kMxfp4Expert: the source's rows (MXFP4) or columns (fused) of this projection:
  // index = o · step + offset for output row o (gate 2o, up 2o + 1, down o).
  int64_t step = 1, offset = 0;
  bool bias = false;                       // kFusedExpert: a slice of a stored [E, W] bias
  int64_t block_rows = 0, block_cols = 0;  // kFp8Block
};

// The checkpoint's tensors as a conversion sees them (`stored`: its headers, in file order).
std::vector<SourceTensor> SourceTensors(const ModelConfig& config,
                                        const std::vector<TensorInfo>& stored);
// Their infos, in the same order (what PlanQuantization takes).
std::vector<TensorInfo> SourceInfos(const std::vector<SourceTensor>& sources);
// The first source decoded from MXFP4 or FP8, or nullptr: such a checkpoint cannot be loaded as
// stored (Model::Load refuses it), only converted.
const SourceTensor* FirstDecodedSource(const std::vector<SourceTensor>& sources);

// Reads bytes [begin, begin + n) of stored tensor `i` into dst.
using StoredRangeReader = std::function<void(size_t i, uint64_t begin, uint64_t n, uint8_t* dst)>;

// Reads source tensors through a reader of the stored ones. A derived tensor is computed whole on
// first use and kept until another one is read, so reading one in row ranges computes it once;
// the last expert's slab of a fused tensor is kept too (gate and up come from the same one).
// Safe to call from several threads (one read at a time).
class SourceReader {
 public:
  SourceReader(std::vector<SourceTensor> sources, std::vector<TensorInfo> stored,
               StoredRangeReader read);
  const std::vector<SourceTensor>& sources() const { return sources_; }
  // The whole tensor (info.dtype, row-major).
  std::vector<uint8_t> Read(size_t i) const;
  // Bytes [begin, begin + n) of source tensor i.
  void ReadRange(size_t i, uint64_t begin, uint64_t n, uint8_t* dst) const;

 private:
  std::vector<uint8_t> Compute(const SourceTensor& t) const;
  const std::vector<uint8_t>& Slab(size_t stored, int64_t expert) const;

  std::vector<SourceTensor> sources_;
  std::vector<TensorInfo> stored_;
  StoredRangeReader read_;
  mutable std::mutex mu_;
  mutable size_t cached_ = SIZE_MAX;  // the derived tensor in cache_
  mutable std::vector<uint8_t> cache_;
  mutable std::pair<size_t, int64_t> slab_key_{SIZE_MAX, -1};  // (stored, expert) in slab_
  mutable std::vector<uint8_t> slab_;
};

}  // namespace tq
