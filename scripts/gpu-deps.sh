#!/usr/bin/env bash
# scripts/gpu-deps.sh [OUT] — packs the Debian build dependencies that a bare GPU machine lacks
# (it has the CUDA toolkit, cmake and ninja, but not these dev packages) into one tarball
# (default .gpudata/deps.tar.xz, ~15 MB; .gpudata/ is git-ignored), to carry to that machine.
# There, unpack and point the build at it:
#   D=/tmp/deps; mkdir -p $D; tar xJf .gpudata/deps.tar.xz -C $D
#   export CMAKE_PREFIX_PATH=$D/usr PKG_CONFIG_SYSROOT_DIR=$D ICU_ROOT=$D/usr CPATH=$D/usr/include
#   export PKG_CONFIG_PATH=$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig
#   export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu
#   TQ_CUDA_ARCH=90a TQ_CMAKE_ARGS="-DTQ_PYTHON=OFF" scripts/gpu-check.sh $OUT/gc
# Needs apt-get (downloads .deb files only; installs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-.gpudata/deps.tar.xz}"
PKGS=(libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libicu-dev libicu72
      libcli11-dev libcpp-httplib-dev libcpp-httplib0.11 libfmt-dev libfmt9 libhwy-dev libhwy1
      libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian libbrotli1 libbrotli-dev
      libcurl4-openssl-dev libcurl4 libssl-dev libssl3 libnghttp2-14 libidn2-0 libunistring2
      librtmp1 libssh2-1 libpsl5 libgssapi-krb5-2 libldap-2.5-0 libzstd-dev zlib1g-dev)
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && apt-get download "${PKGS[@]}" >/dev/null)
mkdir -p "$TMP/root"
for d in "$TMP"/*.deb; do dpkg -x "$d" "$TMP/root"; done
# Static archives only where the build links them (gtest/gmock/benchmark_main); no docs.
find "$TMP/root" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' ! -name 'libbenchmark*' -delete
rm -rf "$TMP/root/usr/share/doc" "$TMP/root/usr/share/man" "$TMP/root/usr/share/lintian"
mkdir -p "$(dirname "$OUT")"
tar cf - -C "$TMP/root" . | xz -9e -T0 > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "gpu-deps: $OUT ($(du -h "$OUT" | cut -f1))"
