#!/usr/bin/env bash
# build-gpu.sh: build dagrun's CUDA binaries on a machine without a GPU.
#
# gorgonia.org/cu v0.9.6 is cgo over the CUDA driver API: it needs cuda.h to
# compile and libcuda.so to link. It compiles against CUDA 11.8 / 12.x
# headers but NOT against CUDA 13's (there cuCtxCreate is a macro for
# cuCtxCreate_v4, which takes a parameter struct). So this script fetches the
# CUDA 11.8 cuda.h, the header-only NVTX3 (nvtx3/) and the driver stub
# libcuda.so (soname libcuda.so.1) from Debian's non-free package
# nvidia-cuda-dev, extracting only those files into .cache/cuda/ (ignored; NVIDIA files are never committed). Binaries
# built this way run on newer drivers (seen: 580 on the H200), which keep the
# old entry points; the stub's soname makes them load the real driver there.
#
# Usage:
#   scripts/build-gpu.sh                 get headers+stub (once), then build
#                                        .gpu/dagrun (if cmd/dagrun has a main),
#                                        .gpu/cudart.test and .gpu/cudart.race.test
#   scripts/build-gpu.sh --headers-only  get headers+stub only, then print
#                                        the CGO_CFLAGS/CGO_LDFLAGS to use
#   scripts/build-gpu.sh --env           print export lines (eval "$(...)")
#
# Where the headers come from, first match wins:
#   DAGRUN_CUDA_INCLUDE=DIR   a folder with cuda.h of CUDA 11.x or 12.x (e.g.
#                             /usr/local/cuda-12.4/include); DAGRUN_CUDA_LIB=DIR
#                             names the folder with libcuda.so (default: the
#                             toolkit's lib64/stubs or lib64 beside DIR)
#   .cache/cuda/              fetched before (DAGRUN_CUDA_CACHE moves it)
#   Debian's nvidia-cuda-dev  fetched with apt-get and dpkg-deb: Debian or
#                             Ubuntu, as root or with password-less sudo,
#                             network access to the mirror (~775 MB once;
#                             DAGRUN_CUDA_FETCH=no never fetches; test.sh
#                             passes no unless given DAGRUN_CUDA_FETCH=yes)
# When none applies it prints one line saying why and exits 3 (test.sh then
# skips the cuda compile check and says so).
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

# unavailable prints why the headers cannot be had here and exits 3.
unavailable() {
  echo "build-gpu.sh: no CUDA headers: $1; set DAGRUN_CUDA_INCLUDE to a CUDA 11.x/12.x include folder (and DAGRUN_CUDA_LIB to the folder with libcuda.so), or run as root on Debian/Ubuntu" >&2
  exit 3
}

# fromEnv sets inc and lib from DAGRUN_CUDA_INCLUDE / DAGRUN_CUDA_LIB.
fromEnv() {
  inc="$DAGRUN_CUDA_INCLUDE"
  [[ -f "$inc/cuda.h" ]] || { echo "build-gpu.sh: DAGRUN_CUDA_INCLUDE=$inc: no cuda.h there" >&2; exit 2; }
  local v; v="$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$inc/cuda.h" | head -1)"
  if [[ -n "$v" && "$v" -ge 13000 ]]; then
    echo "build-gpu.sh: DAGRUN_CUDA_INCLUDE=$inc: cuda.h is CUDA $v; gorgonia.org/cu needs the headers of CUDA 11.x or 12.x" >&2
    exit 2
  fi
  lib="${DAGRUN_CUDA_LIB:-}"
  if [[ -z "$lib" ]]; then
    local d
    for d in "$inc/../lib64/stubs" "$inc/../lib/stubs" "$inc/../lib64" "$inc/../lib" "$inc/../lib/x86_64-linux-gnu/stubs"; do
      if [[ -f "$d/libcuda.so" ]]; then lib="$(cd "$d" && pwd)"; break; fi
    done
  fi
  [[ -n "$lib" && -f "$lib/libcuda.so" ]] || { echo "build-gpu.sh: no libcuda.so beside DAGRUN_CUDA_INCLUDE=$inc; set DAGRUN_CUDA_LIB to its folder (the toolkit's lib64/stubs)" >&2; exit 2; }
}

fetch() {
  if [[ -f "$cache/include/cuda.h" && -f "$cache/include/nvtx3/nvToolsExt.h" && -f "$cache/lib/libcuda.so" ]]; then
    return 0
  fi
  [[ "${DAGRUN_CUDA_FETCH:-yes}" != no ]] || unavailable "fetching them is off (DAGRUN_CUDA_FETCH=no; =yes adds an apt source and downloads Debian's nvidia-cuda-dev, about 775 MB once)"
  [[ -r /etc/os-release ]] || unavailable "not Debian or Ubuntu (no /etc/os-release), so nvidia-cuda-dev cannot be fetched"
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || unavailable "no apt-get/dpkg-deb to fetch Debian's nvidia-cuda-dev"
  if [[ $(id -u) -ne 0 ]] && ! sudo -n true 2>/dev/null; then
    unavailable "fetching Debian's nvidia-cuda-dev needs root or password-less sudo"
  fi
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo -n"
  . /etc/os-release
  [[ "${ID:-}" == debian || "${ID:-}" == ubuntu || " ${ID_LIKE:-} " == *" debian "* ]] || unavailable "not Debian or Ubuntu ($ID), so nvidia-cuda-dev cannot be fetched"
  local codename="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
  local list=/etc/apt/sources.list.d/dagrun-nonfree.sources
  local tmp; tmp="$(mktemp -d)"; chmod 755 "$tmp"
  # apt downloads as its sandbox user _apt: give it the folder, so apt does
  # not warn that it downloads unsandboxed.
  if [[ $(id -u) -eq 0 ]] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
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
  echo "build-gpu.sh: downloading nvidia-cuda-dev (large, ~775 MB; only cuda.h, nvtx3/ and the driver stub are kept)" >&2
  (cd "$tmp" && apt-get download -qq nvidia-cuda-dev >&2)
  local deb; deb="$(ls "$tmp"/nvidia-cuda-dev_*.deb)"
  echo "build-gpu.sh: $(basename "$deb")" >&2
  (cd "$tmp" && dpkg-deb --fsys-tarfile "$deb" | tar -x ./usr/include/cuda.h ./usr/include/nvtx3 ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so)
  mkdir -p "$cache/include" "$cache/lib"
  cp "$tmp/usr/include/cuda.h" "$cache/include/cuda.h"
  rm -rf "$cache/include/nvtx3" && cp -r "$tmp/usr/include/nvtx3" "$cache/include/nvtx3" # NVTX3, header-only: stage names in Nsight Systems
  cp "$tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$cache/lib/libcuda.so"
  basename "$deb" >"$cache/SOURCE"
  grep -m1 'define CUDA_VERSION' "$cache/include/cuda.h" >&2
}

if [[ -n "${DAGRUN_CUDA_INCLUDE:-}" ]]; then
  fromEnv
else
  fetch
  inc="$cache/include" lib="$cache/lib"
fi
export CGO_ENABLED=1
export CGO_CFLAGS="-I$inc"
export CGO_LDFLAGS="-L$lib"

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
