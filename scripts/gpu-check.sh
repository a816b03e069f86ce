#!/usr/bin/env bash
# scripts/gpu-check.sh [OUT_DIR] — checks the CUDA build on a machine with an NVIDIA GPU and
# nothing else prepared (CUDA toolkit at /usr/local/cuda or CUDA_HOME, the Debian build packages
# of scripts/setup.sh). One command:
#   1. builds the `cuda` preset (for the GPU present: CMAKE_CUDA_ARCHITECTURES=native unless
#      TQ_CUDA_ARCH is set) — turboquant, test_kernels, test_model;
#   2. runs the GPU conformance suite (every op of kernels/backend.h on cuda against the scalar
#      oracle; prints its table) and the model-level GPU tests (ctest -R 'Cuda|Gpu');
#   3. runs `turboquant bench --device cuda --json` on the standard shapes synthesized here
#      (synth --like llama-3.1-8b and mistral-7b, bf16 and TurboQuant 4-bit), when this build's
#      bench has --device;
#   4. prints one table and writes OUT_DIR/gpu-check.json (plus conformance.txt / .json,
#      ctest.txt, bench-*.json).
# Exit status: 0 when every step that ran passed; 1 otherwise; 2 for usage / no GPU.
# Env: TQ_CUDA_ARCH (e.g. 90a), TQ_CMAKE_ARGS (extra configure options), JOBS (build jobs, default nproc), BENCH_LAYERS (synthesize only
# the first N layers: a quick smoke run; default all), SKIP_BENCH=1, SANITIZE=1 (also run the op
# suite under compute-sanitizer memcheck), TQ_SHARED_DIR (shared models for the model tests),
# SHAPES (default "llama-3.1-8b mistral-7b"), BENCH_BITS (TurboQuant widths, default "4"),
# BENCH_OPS=1 (also bench_cuda_ops, the per-kernel roofline rows, when built with -DTQ_BENCH=ON).
set -uo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "${1:-$ROOT/gpu-check-out}" && cd "${1:-$ROOT/gpu-check-out}" && pwd)"
JOBS="${JOBS:-$(nproc)}"
BUILD="$ROOT/build/cuda"
START=$(date +%s)
declare -a ROWS=()  # "step|status|detail"
FAILED=0
row() { ROWS+=("$1|$2|$3"); [[ "$2" == FAIL ]] && FAILED=1; return 0; }
log() { echo "[gpu-check $(($(date +%s) - START))s] $*" >&2; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "[gpu-check] no NVIDIA GPU visible (nvidia-smi -L failed): run this on the GPU machine" >&2
  exit 2
fi
GPU="$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader | head -1)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="$CUDA_HOME/bin/nvcc"
[[ -x "$NVCC" ]] || { echo "[gpu-check] no nvcc at $NVCC (set CUDA_HOME)" >&2; exit 2; }
CUDA_VER="$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
log "GPU: $GPU; CUDA $CUDA_VER; $JOBS build jobs"

# 1. Build.
ARCH="${TQ_CUDA_ARCH:-native}"
T0=$(date +%s)
# shellcheck disable=SC2086  # TQ_CMAKE_ARGS: extra -D options, word-split on purpose
if cmake --preset cuda -S "$ROOT" -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
     ${TQ_CMAKE_ARGS:-} >"$OUT/build.txt" 2>&1 &&
   cmake --build "$BUILD" -j"$JOBS" --target turboquant test_kernels test_model test_convert >>"$OUT/build.txt" 2>&1; then
  row build ok "cuda preset, arch $ARCH, $(($(date +%s) - T0)) s"
else
  row build FAIL "see build.txt"
  tail -30 "$OUT/build.txt" >&2
fi
TQ="$BUILD/src/cli/turboquant"

# 2. Conformance suite (one table) and the model-level GPU tests.
if [[ -x "$BUILD/tests/test_kernels" ]]; then
  T0=$(date +%s)
  "$BUILD/tests/test_kernels" --gtest_filter='*/cuda*' --gtest_output="json:$OUT/conformance.json" \
    >"$OUT/conformance.txt" 2>&1
  rc=$?
  cases="$(grep -Eo '^[0-9]+ cases, [0-9]+ failed' "$OUT/conformance.txt" | tail -1)"
  skipped="$(grep -c '^\[  SKIPPED \]' "$OUT/conformance.txt")"
  if [[ $rc -eq 0 && "$skipped" == 0 ]]; then
    row conformance ok "${cases:-no table}, $(($(date +%s) - T0)) s"
  else
    row conformance FAIL "rc $rc, ${cases:-no table}, $skipped skipped lines (see conformance.txt)"
  fi
  sed -n '/^backend /,/cases, /p' "$OUT/conformance.txt"
fi
if [[ "${SANITIZE:-0}" == 1 && -x "$BUILD/tests/test_kernels" ]]; then
  T0=$(date +%s)
  SAN="$CUDA_HOME/bin/compute-sanitizer"
  if "$SAN" --tool memcheck --error-exitcode 1 "$BUILD/tests/test_kernels" \
       --gtest_filter='*CudaConformance.*/cuda' >"$OUT/memcheck.txt" 2>&1; then
    row memcheck ok "compute-sanitizer memcheck, CudaConformance.*, $(($(date +%s) - T0)) s"
  else
    row memcheck FAIL "see memcheck.txt"
  fi
fi
if [[ -d "$BUILD" ]]; then
  T0=$(date +%s)
  ( cd "$BUILD" && ctest -R 'Cuda|Gpu' -E 'CudaConformance|CudaKvAttention' --output-on-failure \
      --timeout 300 ) >"$OUT/ctest.txt" 2>&1
  rc=$?
  summary="$(grep -E 'tests passed|No tests were found' "$OUT/ctest.txt" | tail -1)"
  if [[ $rc -eq 0 ]]; then
    row model-gpu-tests ok "${summary:-ran}, $(($(date +%s) - T0)) s"
  elif grep -q 'No tests were found' "$OUT/ctest.txt"; then
    row model-gpu-tests none "no model-level GPU test in this build"
  else
    row model-gpu-tests FAIL "${summary:-rc $rc} (see ctest.txt)"
  fi
fi

# 3. bench --device cuda on the standard shapes.
declare -a BENCH=()
if [[ "${SKIP_BENCH:-0}" == 1 ]]; then
  row bench skipped "SKIP_BENCH=1"
elif [[ ! -x "$TQ" ]]; then
  row bench FAIL "no turboquant binary"
elif ! "$TQ" bench --help 2>&1 | grep -q -- '--device'; then
  row bench skipped "this build's bench has no --device (the forward pass is not on the backend yet)"
else
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  layers=()
  [[ -n "${BENCH_LAYERS:-}" ]] && layers=(--layers "$BENCH_LAYERS")
  for shape in ${SHAPES:-llama-3.1-8b mistral-7b}; do
    if ! "$TQ" synth --like "$shape" --out "$WORK/$shape-bf16" "${layers[@]}" >"$OUT/synth-$shape.txt" 2>&1; then
      row "bench $shape" FAIL "synth failed (see synth-$shape.txt)"
      continue
    fi
    # --scale rms: the fast scale search (the MSE search of an 8B model takes minutes); the
    # bytes and the kernels are the same.
    kinds=(bf16)
    for bits in ${BENCH_BITS:-4}; do
      "$TQ" convert --model "$WORK/$shape-bf16" --out "$WORK/$shape-tq$bits" --bits "$bits" \
        --scale rms >"$OUT/convert-$shape-tq$bits.txt" 2>&1 || row "bench $shape tq$bits" FAIL "convert failed"
      kinds+=("tq$bits")
    done
    for kind in "${kinds[@]}"; do
      [[ -d "$WORK/$shape-$kind" ]] || continue
      json="$OUT/bench-$shape-$kind.json"
      if "$TQ" bench --model "$WORK/$shape-$kind" --device cuda --json >"$json" 2>"$OUT/bench-$shape-$kind.err"; then
        line="$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("prefill %.0f tok/s, decode %.1f tok/s" % (j["prefill_tok_s"], j["decode_tok_s"]))' "$json" 2>/dev/null)"
        row "bench $shape $kind" ok "${line:-see $json}"
        BENCH+=("$json")
      else
        row "bench $shape $kind" FAIL "see bench-$shape-$kind.err"
      fi
      [[ "$kind" == bf16 ]] || rm -rf "${WORK:?}/$shape-$kind"
    done
    rm -rf "${WORK:?}/$shape-bf16"
  done
fi
if [[ "${BENCH_OPS:-0}" == 1 ]]; then
  if cmake --build "$BUILD" -j"$JOBS" --target bench_cuda_ops >>"$OUT/build.txt" 2>&1; then
    # 0.05 s a case: the default minimum time makes the whole set take ~4.5 minutes.
    "$BUILD/bench/bench_cuda_ops" --benchmark_min_time=0.05 >"$OUT/bench-ops.txt" 2>&1 &&
      row bench-ops ok "see bench-ops.txt" || row bench-ops FAIL "see bench-ops.txt"
    cat "$OUT/bench-ops.txt"
  else
    row bench-ops FAIL "bench_cuda_ops did not build (-DTQ_BENCH=ON?)"
  fi
fi

# 4. One table, one JSON.
echo
echo "gpu-check: $GPU, CUDA $CUDA_VER, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - START)) s"
printf '%-28s %-8s %s\n' step status detail
for r in "${ROWS[@]}"; do
  IFS='|' read -r a b c <<<"$r"
  printf '%-28s %-8s %s\n' "$a" "$b" "$c"
done
python3 - "$OUT/gpu-check.json" "$GPU" "$CUDA_VER" "$FAILED" "${ROWS[@]}" -- "${BENCH[@]}" <<'EOF'
import json, sys
out, gpu, cuda, failed, *rest = sys.argv[1:]
sep = rest.index("--")
rows = [dict(zip(("step", "status", "detail"), r.split("|", 2))) for r in rest[:sep]]
bench = {}
for path in rest[sep + 1:]:
    try:
        bench[path.rsplit("/", 1)[-1][len("bench-"):-len(".json")]] = json.load(open(path))
    except Exception as e:  # a half-written file: say so instead of failing the summary
        bench[path] = {"error": str(e)}
json.dump({"gpu": gpu, "cuda": cuda, "passed": failed == "0", "steps": rows, "bench": bench},
          open(out + ".tmp", "w"), indent=1)
import os
os.replace(out + ".tmp", out)
EOF
log "wrote $OUT/gpu-check.json"
exit "$FAILED"
