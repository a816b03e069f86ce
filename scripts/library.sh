#!/usr/bin/env bash
# The library's contract (CI): the Python bindings' unittest against the CLI, then
# `cmake --install` and the examples built against the installed package, the way a user's
# project would, and run on the shared llama; then `pip install ./python` into a virtual
# environment (the package as a user installs it) and the same unittest against it. Uses the
# release build (adds -DTQ_PYTHON=ON); the pip build shares its objects through ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED="${TQ_SHARED_DIR:-$(pwd)/../shared}"
MODEL="$SHARED/models/tq-llama-21m"
if [[ ! -d "$MODEL" ]]; then
  if [[ "${CI:-}" == "true" ]]; then echo "library: $MODEL missing" >&2; exit 1; fi
  echo "library: $MODEL missing, skipping" >&2
  exit 0
fi
cmake --preset release -DTQ_PYTHON=ON >/dev/null
cmake --build --preset release --target turboquant _turboquant turboquant_lib
PYTHONPATH=build/release/python TQ_CLI="$(pwd)/build/release/src/cli/turboquant" \
  TQ_SHARED_DIR="$SHARED" python3 -m unittest discover -s python/tests -v
rm -rf build/install build/examples
cmake --install build/release --prefix "$(pwd)/build/install" >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$(pwd)/build/install" >/dev/null
cmake --build build/examples
printf 'The sky is blue.\nA dictionary lists words.\n' > build/examples/lines.txt
build/examples/tq_score "$MODEL" build/examples/lines.txt
echo "What is a word?" | build/examples/tq_chat "$MODEL" 16
pkg-config --cflags --libs "$(pwd)/build/install/lib/pkgconfig/turboquant.pc"
# The shared-library build (-DBUILD_SHARED_LIBS=ON: one libturboquant.so exporting only
# turboquant::), installed, and the examples built and run against it (objects from ccache).
rm -rf build/shared build/install-shared build/examples-shared
cmake -S . -B build/shared -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ \
  -DCMAKE_C_COMPILER=gcc -DBUILD_SHARED_LIBS=ON -DTQ_TESTS=OFF -DTQ_BENCH=OFF >/dev/null
cmake --build build/shared -j "$(nproc)"
cmake --install build/shared --prefix "$(pwd)/build/install-shared" >/dev/null
cmake -S examples -B build/examples-shared -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$(pwd)/build/install-shared" >/dev/null
cmake --build build/examples-shared
ldd build/examples-shared/tq_chat | grep -q "libturboquant.so" ||
  { echo "library: tq_chat does not link libturboquant.so" >&2; exit 1; }
if nm -D --defined-only build/install-shared/lib/libturboquant.so | c++filt |
     grep -v -E ' (turboquant::|typeinfo (name )?for turboquant::|vtable for turboquant::)' |
     grep -q ' [TDBVWu] '; then
  echo "library: libturboquant.so exports symbols outside turboquant::" >&2; exit 1
fi
build/examples-shared/tq_score "$MODEL" build/examples/lines.txt
# pip install ./python (no PyPI: setuptools/wheel from Debian, hence --no-build-isolation) into a
# venv that sees the system packages (numpy), outside the checkout; then the unittest against it.
ROOT="$(pwd)"
PYTMP="$(mktemp -d)"
/usr/bin/python3 -m venv --system-site-packages "$PYTMP/venv"
"$PYTMP/venv/bin/pip" install --quiet --no-build-isolation ./python
(cd "$PYTMP" && TQ_CLI="$ROOT/build/release/src/cli/turboquant" TQ_SHARED_DIR="$SHARED" \
  "$PYTMP/venv/bin/python" -m unittest discover -s "$ROOT/python/tests")
rm -rf "$PYTMP"
