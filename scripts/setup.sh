#!/usr/bin/env bash
# Installs the Debian build dependencies (and the npm packages of the server's end-to-end test),
# then configures and builds the release preset. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build ccache pkg-config
      nlohmann-json3-dev libfmt-dev libpcre2-dev libicu-dev libcli11-dev libcpp-httplib-dev
      libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev curl
      g++-aarch64-linux-gnu libcurl4-openssl-dev libssl-dev pybind11-dev python3-dev
      python3-numpy python3-venv python3-setuptools python3-wheel python3-pip chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (the server's end-to-end test): any installation will do, Debian's or another
# vendor's (whose nodejs package already contains npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The OpenAI client and playwright-core (drives chromium for the chat page's browser test) for the
# server's end-to-end tests (tests/e2e), when those tests exist.
if [ -f tests/e2e/package.json ] && [ ! -d tests/e2e/node_modules/playwright-core ]; then
  (cd tests/e2e && npm install --no-audit --no-fund --silent)
fi

cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
echo "setup: built build/release/src/cli/turboquant"
