// Data-free sensitivity of a model's output to each tensor's quantization error (issue 18, lever
// 1; the linearity theorem of HIGGS, Malinovskii et al. 2024): for small errors the model's
// output divergence is close to a weighted sum of the per-tensor relative errors,
//   KL(p || p̂) ≈ Σ_l α_l · t_l²,   t_l² = ‖W_l − Ŵ_l‖² / ‖W_l‖²,
// so α_l is measured by injecting Gaussian noise of a known t² into one tensor at a time and
// measuring the KL divergence of the next-token distributions on random token sequences (no text),
// or on text the model samples itself.
//
// The noise imitates quantization error: it is added in the rotated domain the codes live in (the
// tensor's Hadamard rotation, the same signs convert uses), each element's standard deviation t
// times the RMS of its group of `noise_group` weights; the embedding (never rotated) gets the same
// per-group noise on its raw rows. Tensors that are quantized as a set (all experts of one
// projection of a layer) are perturbed together and share the measured α in proportion to size.
//
// Each perturbation writes a copy of the checkpoint with the one tensor replaced by its perturbed
// fp32 version to a temp dir (in /dev/shm when present) and loads it: about 2 forward passes of
// `sequences · tokens` tokens per tensor group. Meant for models that fit in memory; on 8B shapes
// on a CPU it is slow (hours), and the priors (budget.h) remain the default there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/quant_recipe.h"

namespace tq {

struct SensitivityOptions {
  int64_t sequences = 4;  // random token sequences
  int64_t tokens = 128;   // tokens per sequence (KL averaged over every position)
  double noise = 0.125;  // t: relative noise RMS per group (t² = 1/64, near q4's ~0.006–q3's 0.03)
  int noise_group = 64;        // weights per noise-scaling group
  uint64_t seed = 0;           // random tokens and noise (the rotation uses rotation_seed)
  uint64_t rotation_seed = 0;  // convert's --seed (sign vectors)
  bool progress = true;
  // The token sequences: uniformly random ids, or text the model writes itself (sampled at
  // temperature `temperature` from a random first token; still no external data).
  enum class Text { kRandom, kSelf } text = Text::kRandom;
  double temperature = 1.0;
};

struct TensorSensitivity {
  std::string name;  // the tensor (a member of a set: its own name)
  double alpha = 0;  // KL (nats per token) per unit relative error t²
  double kl = 0;     // measured KL of its set's perturbation (nats per token)
  double t2 = 0;     // realized relative error of its set's perturbation
};

// α for the tensors recipe.tensors[i], i in `which` (quantizable 2-D float tensors). `read`
// returns the source bytes of recipe.tensors[i] (as stored: bf16/fp16/fp32). The result is in the
// order of `which`. Throws tq::Error naming the tensor if a perturbed model cannot be run.
std::vector<TensorSensitivity> MeasureSensitivity(
    const std::string& model_dir, const QuantRecipe& recipe, const std::vector<size_t>& which,
    const SensitivityOptions& opts, const std::function<std::vector<uint8_t>(size_t)>& read);

// The key of the set a tensor is perturbed with: its rotation group for expert projections
// ("model.layers.3/experts_in" + role), else its own name.
std::string SensitivitySetKey(const TensorDecision& d);

}  // namespace tq
