// GPU test gating: a test that needs the CUDA backend calls TQ_REQUIRE_GPU() first. Without a
// CUDA build or without a visible GPU it is skipped with the reason printed (CI has no GPU: the
// GPU machine runs these through scripts/gpu-check.sh).
#pragma once

#include <gtest/gtest.h>

#include "kernels/backend.h"

#define TQ_REQUIRE_GPU()                                                              \
  do {                                                                                \
    if (!::tq::kernels::BuiltWithCudaBackend())                                       \
      GTEST_SKIP() << "this build has no CUDA backend (configure with -DTQ_CUDA=ON)"; \
    if (::tq::kernels::CudaDeviceCount() == 0)                                        \
      GTEST_SKIP() << "no NVIDIA GPU is visible (CUDA reports 0 devices)";            \
  } while (0)
