// FFN activations and logit soft-capping of the newer families, scalar reference (ref::) and
// fast CPU path (cpu::) with the same contract. out may alias an input.
#pragma once

#include <cstdint>

namespace tq::kernels {

// GPT-OSS's clamped SwiGLU constants.
struct ClampedSwigluParams {
  float alpha = 1.702f;  // sigmoid sharpness
  float limit = 7.0f;    // gate <= limit, |up| <= limit
};

namespace ref {
// out[i] = gelu_tanh(gate[i]) · up[i], gelu_tanh(x) = x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³))).
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
// out[i] = max(x[i], 0)² (nemotron_h's ungated MLP).
void Relu2(const float* x, int64_t n, float* out);
// g = min(gate, limit), u = clamp(up, −limit, limit); out = g · sigmoid(alpha g) · (u + 1).
void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                   float* out);
// x[i] = cap · tanh(x[i] / cap) in place (cap > 0).
void Softcap(float* x, int64_t n, float cap);
}  // namespace ref

namespace cpu {
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Relu2(const float* x, int64_t n, float* out);
void ClampedSwiglu(const float* gate, const float* up, int64_t n, const ClampedSwigluParams& p,
                   float* out);
void Softcap(float* x, int64_t n, float cap);
}  // namespace cpu

}  // namespace tq::kernels
