#!/usr/bin/env bash
# scripts/release.sh OUTDIR
#
# Writes a release of dagrun into OUTDIR: the CLI for Linux and macOS,
# amd64 and arm64, cross-compiled as static binaries (CGO_ENABLED=0: import,
# plan, check, run on the simulator; the CUDA backend needs a -tags cuda
# build on the GPU machine, scripts/build-gpu.sh), named
# dagrun-VERSION-GOOS-GOARCH; the dagrun_torch wheels that carry the same
# binaries and its sdist (scripts/build-wheel.sh); and SHA256SUMS over them
# all. VERSION is cmd/dagrun/version.go's `release`.
#
# A user checks and installs a binary with:
#   sha256sum --ignore-missing -c SHA256SUMS   (macOS: shasum -a 256 --ignore-missing -c SHA256SUMS)
#   chmod +x dagrun-VERSION-linux-amd64 && mv dagrun-VERSION-linux-amd64 ~/.local/bin/dagrun
#
# Needs Go and python3 (standard library only). Writes only under OUTDIR
# (and Go's build cache).
set -euo pipefail
if [[ $# -ne 1 || $1 == -* ]]; then
  sed -n '2,17s/^# \{0,1\}//p' "$0" >&2
  [[ ${1:-} == -h || ${1:-} == --help ]] && exit 0
  exit 2
fi
out="$(mkdir -p "$1" && cd "$1" && pwd)"
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
"$py" -B python/_build/dagrun_build.py "$out" --binaries all
"$py" -B python/_build/dagrun_build.py "$out" --sdist all
version="$(sed -n 's/^const release = "\(.*\)"$/\1/p' cmd/dagrun/version.go)"
cd "$out"
files=(dagrun-"$version"-* dagrun_torch-"$version"-*.whl dagrun_torch-"$version".tar.gz)
if command -v sha256sum >/dev/null; then sha256sum "${files[@]}" >SHA256SUMS; else shasum -a 256 "${files[@]}" >SHA256SUMS; fi
echo "$out/SHA256SUMS"
