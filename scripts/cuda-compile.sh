#!/usr/bin/env bash
# Compiles the CUDA backend (preset `cuda`: kernels/cuda/ with nvcc, for sm_90a) and runs the
# kernels test binary's CUDA tests, which skip with a printed reason on a machine without a GPU
# (the host-side code decoder test runs everywhere; the emulated "emu" variants run in every
# build's ctest). For CI machines: nvcc installed, no GPU.
# Costs about 4 minutes on 2 cores (core/quant/kernels only, no ccache). Without nvcc it skips
# with a message, and fails under CI=true (CI machines have nvcc: its absence is a setup bug).
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
if [ ! -x "$NVCC" ]; then
  echo "cuda-compile: no nvcc at $NVCC (set CUDA_HOME)" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
cmake --preset cuda -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
cmake --build --preset cuda -j "$(nproc)" --target test_kernels
./build/cuda/tests/test_kernels --gtest_filter='CudaCodeAt*:*/cuda*' --gtest_brief=1
