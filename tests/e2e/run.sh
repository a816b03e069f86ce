#!/usr/bin/env bash
# End-to-end tests of `turboquant serve` (Node's test runner + the official openai client).
# Usage: tests/e2e/run.sh [path/to/turboquant]   (TQ_SHARED_DIR, TQ_LOAD_SECONDS optional)
set -euo pipefail
if [ $# -ge 1 ]; then
  [ -x "$1" ] || { echo "e2e: no executable at $1" >&2; exit 1; }
  export TQ_BIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fi
cd "$(dirname "$0")"
command -v node >/dev/null || { echo "e2e: node not found (scripts/setup.sh installs it)" >&2; exit 1; }
if [ ! -d node_modules/openai ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund --silent
fi
# One file at a time: each starts its own server, and the load test wants the machine.
exec node --test --test-concurrency=1 --test-reporter=spec .
