#!/usr/bin/env bash
# build-gpu.sh: build dagrun's CUDA binaries on a machine without a GPU.
#
# gorgonia.org/cu v0.9.6 is cgo over the CUDA driver API: it needs cuda.h to
# compile and libcuda.so to link. It compiles against CUDA 11.8 / 12.x
# headers but NOT against CUDA 13's (there cuCtxCreate is a macro for
# cuCtxCreate_v4, which takes a parameter struct). So this script fetches the
# CUDA 11.8 cuda.h and the driver stub libcuda.so (soname libcuda.so.1) from
# Debian's non-free package nvidia-cuda-dev, extracting only those two files
# into .cache/cuda/ (ignored; NVIDIA files are never committed). Binaries
# built this way run on newer drivers (seen: 580 on the H200), which keep the
# old entry points; the stub's soname makes them load the real driver there.
#
# Usage:
#   scripts/build-gpu.sh                 fetch headers+stub (once), then build
#                                        .gpu/dagrun (if cmd/dagrun has a main),
#                                        .gpu/cudart.test and .gpu/cudart.race.test
#   scripts/build-gpu.sh --headers-only  fetch headers+stub only, then print
#                                        the CGO_CFLAGS/CGO_LDFLAGS to use
#   scripts/build-gpu.sh --env           print export lines (eval "$(...)")
#
# Needs: apt-get and dpkg-deb (Debian/Ubuntu), root or sudo for apt-get update
# of the extra sources entry, network access to the Debian mirror.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${DAGRUN_CUDA_CACHE:-$root/.cache/cuda}"
out="${DAGRUN_GPU_OUT:-$root/.gpu}"
mode=build
case "${1:-}" in
  --headers-only) mode=headers ;;
  --env) mode=env ;;
  "") ;;
  -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
  *) echo "build-gpu.sh: unknown argument $1 (want --headers-only, --env or nothing)" >&2; exit 2 ;;
esac

fetch() {
  if [[ -f "$cache/include/cuda.h" && -f "$cache/lib/libcuda.so" ]]; then
    return 0
  fi
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  . /etc/os-release
  local codename="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
  local list=/etc/apt/sources.list.d/dagrun-nonfree.sources
  local tmp; tmp="$(mktemp -d)"; chmod 755 "$tmp"
  trap 'rm -rf "$tmp"' RETURN
  if [[ "${ID:-}" == debian ]]; then
    if [[ ! -f $list ]]; then
      echo "build-gpu.sh: adding $list (Debian $codename contrib non-free)" >&2
      $sudo tee "$list" >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $codename
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    fi
    $sudo apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >&2
  else
    # Ubuntu: multiverse carries nvidia-cuda-dev.
    echo "build-gpu.sh: not Debian ($ID); relying on the configured sources (Ubuntu: multiverse)" >&2
    $sudo apt-get update -qq >&2
  fi
  echo "build-gpu.sh: downloading nvidia-cuda-dev (large, ~775 MB; only 2 files are kept)" >&2
  (cd "$tmp" && apt-get download -q nvidia-cuda-dev >&2)
  local deb; deb="$(ls "$tmp"/nvidia-cuda-dev_*.deb)"
  echo "build-gpu.sh: $(basename "$deb")" >&2
  (cd "$tmp" && dpkg-deb --fsys-tarfile "$deb" | tar -x ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so)
  mkdir -p "$cache/include" "$cache/lib"
  cp "$tmp/usr/include/cuda.h" "$cache/include/cuda.h"
  cp "$tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$cache/lib/libcuda.so"
  basename "$deb" >"$cache/SOURCE"
  grep -m1 'define CUDA_VERSION' "$cache/include/cuda.h" >&2
}

fetch
export CGO_ENABLED=1
export CGO_CFLAGS="-I$cache/include"
export CGO_LDFLAGS="-L$cache/lib"

case $mode in
  headers)
    echo "export CGO_ENABLED=1 CGO_CFLAGS='$CGO_CFLAGS' CGO_LDFLAGS='$CGO_LDFLAGS'"
    exit 0 ;;
  env)
    echo "export CGO_ENABLED=1 CGO_CFLAGS='$CGO_CFLAGS' CGO_LDFLAGS='$CGO_LDFLAGS'"
    exit 0 ;;
esac

cd "$root"
mkdir -p "$out"
if compgen -G "cmd/dagrun/*.go" >/dev/null && grep -qs '^package main' cmd/dagrun/*.go; then
  echo "build-gpu.sh: go build -tags cuda -o $out/dagrun ./cmd/dagrun" >&2
  go build -tags cuda -o "$out/dagrun" ./cmd/dagrun
fi
# The GPU tests as binaries (the GPU machine has no Go toolchain), plain and
# with the race detector.
echo "build-gpu.sh: go test -c -tags cuda -o $out/cudart.test ./cudart" >&2
go test -c -tags cuda -o "$out/cudart.test" ./cudart
echo "build-gpu.sh: go test -c -race -tags cuda -o $out/cudart.race.test ./cudart" >&2
go test -c -race -tags cuda -o "$out/cudart.race.test" ./cudart
echo "build-gpu.sh: done; binaries in $out" >&2
ls -la "$out" >&2
