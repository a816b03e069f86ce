#!/usr/bin/env bash
# CI check that the CPU kernels build for aarch64 (NEON through the generic vector code; the
# x86 intrinsic kernels compile to stubs): configures build/aarch64 with cmake/aarch64.cmake and
# -DTQ_KERNELS_ONLY=ON (the other layers need arm64 ICU/PCRE2) and builds tq_core, tq_quant and
# tq_kernels. Needs g++-aarch64-linux-gnu (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v aarch64-linux-gnu-g++ >/dev/null || {
  echo "aarch64-linux-gnu-g++ not found: apt-get install g++-aarch64-linux-gnu" >&2
  exit 1
}
build=${BUILD_DIR:-build/aarch64}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64.cmake" -DTQ_KERNELS_ONLY=ON
ninja -C "$build" -j"${JOBS:-2}" tq_core tq_quant tq_kernels
n=$(aarch64-linux-gnu-objdump -d "$build"/src/kernels/libtq_kernels.a | grep -c -w fmla || true)
echo "aarch64 core/quant/kernels built: $n NEON fmla instructions in libtq_kernels.a"
