#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for N seconds (default 60) from its seed
# corpus in fuzz/corpus/<name>. A crash fails the script and leaves the reproducer in build/fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
cmake --preset fuzz >/dev/null
targets=()
for src in fuzz/*.cc; do n=$(basename "$src" .cc); targets+=("fuzz_$n"); done
# Only the fuzz targets (and the parser libraries they link), not the whole project.
cmake --build --preset fuzz -j "$(nproc)" --target "${targets[@]}"
shopt -s nullglob
for bin in build/fuzz/fuzz/fuzz_*; do
  name=$(basename "$bin"); name=${name#fuzz_}
  corpus=$(mktemp -d)
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$corpus/"
  echo "fuzz: $name for ${SECS}s"
  (cd build/fuzz && "../../$bin" -max_total_time="$SECS" -rss_limit_mb=4096 -print_final_stats=0 \
      "$corpus" 2>&1 | tail -3)
  rm -rf "$corpus"
done
