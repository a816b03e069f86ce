#!/usr/bin/env bash
# The main job end to end: convert a Hugging Face checkpoint to TurboQuant 4-bit, then generate.
#   ./scripts/demo.sh [HF_DIR] [--backend cpu|cuda]
# HF_DIR defaults to models/tq-llama-21m (shipped in the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC="${1:-models/tq-llama-21m}"
TQ=${TQ_BIN:-build/release/src/cli/turboquant}
[ -x "$TQ" ] || { echo "demo: $TQ not built; run ./scripts/setup.sh first" >&2; exit 1; }
OUT="$(mktemp -d)/$(basename "$SRC")-tq4"
trap 'rm -rf "$(dirname "$OUT")"' EXIT

echo "== inspect $SRC"
"$TQ" inspect -m "$SRC"
if "$TQ" convert --help >/dev/null 2>&1; then
  echo "== convert to TurboQuant 4-bit -> $OUT"
  "$TQ" convert -m "$SRC" -o "$OUT" --bits 4
  echo "== doctor $OUT"
  "$TQ" doctor -m "$OUT"
  MODEL="$OUT"
else
  MODEL="$SRC"
fi
echo "== generate"
# Sampled with a fixed seed: a 21M-parameter model loops under greedy decoding.
"$TQ" generate -m "$MODEL" -p "Once upon a time, there was" -n 64 \
  --temp 0.7 --top-p 0.9 --rep-penalty 1.15 -s 1
echo
