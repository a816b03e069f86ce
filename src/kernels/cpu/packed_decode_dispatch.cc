// Picks the int8 decode and prefill kernels of the active ISA (isa.h).
#include "core/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_decode.h"
#include "kernels/cpu/packed_prefill.h"

namespace tq::kernels::cpu {

bool FastDecodeSupports(const PackedMatrix& w) {
  switch (ActiveIsa()) {
    case Isa::kAmx:  // the decode kernels are the avx512 ones
    case Isa::kAvx512:
      return isa::Avx512Supports(w);
    case Isa::kAvx2:
      return isa::Avx2Supports(w);
    case Isa::kScalar:
      return false;
  }
  return false;
}

void FastPackedDecode(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                      float* y) {
  TQ_CHECK(n >= 1 && n <= kFastDecodeMaxTokens && FastDecodeSupports(w), "packed decode",
           "{} tokens or {} [{}, {}] g{} not supported by the {} kernel", n,
           quant::Traits(w.format).name, w.rows, w.cols, w.group_size, IsaName(ActiveIsa()));
  if (ActiveIsa() >= Isa::kAvx512) return isa::Avx512Decode(x, n, w, bias, y);
  isa::Avx2Decode(x, n, w, bias, y);
}

int64_t PrefillInt8MinTokens(const PackedMatrix& w) {
  const bool segments = w.group_size % 128 == 0 && w.cols % 128 == 0;
  return ActiveIsa() == Isa::kAvx512 && segments && FastDecodeSupports(w) ? 9
                                                                          : kPrefillInt8MinTokens;
}

bool PrefillInt8Supports(const PackedMatrix& w) {
  switch (ActiveIsa()) {
    case Isa::kAmx:  // the GEMM is the avx512 one (AMX tiles take what they support first)
    case Isa::kAvx512:
      return isa::Avx512PrefillSupports(w);
    case Isa::kAvx2:
      return isa::Avx2PrefillSupports(w);
    case Isa::kScalar:
      return false;
  }
  return false;
}

void PrefillInt8MatMul(const float* x, int64_t n, const PackedMatrix& w, const float* bias,
                       float* y) {
  TQ_CHECK(n >= 1 && PrefillInt8Supports(w), "packed prefill",
           "{} tokens or {} [{}, {}] g{} not supported by the {} int8 GEMM", n,
           quant::Traits(w.format).name, w.rows, w.cols, w.group_size, IsaName(ActiveIsa()));
  if (ActiveIsa() >= Isa::kAvx512) return isa::Avx512Prefill(x, n, w, bias, y);
  isa::Avx2Prefill(x, n, w, bias, y);
}

}  // namespace tq::kernels::cpu
