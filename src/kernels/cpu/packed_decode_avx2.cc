// AVX2 int8 decode kernel (packed_decode.h): not yet written; the avx2 level uses the generic
// dequantize-and-dot path of cpu/packed_matmul.cc.
#include "kernels/cpu/packed_decode.h"

namespace tq::kernels::cpu::isa {
bool Avx2Supports(const PackedMatrix&) { return false; }
void Avx2Decode(const float*, int64_t, const PackedMatrix&, const float*, float*) {}
}  // namespace tq::kernels::cpu::isa
