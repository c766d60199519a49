#!/usr/bin/env bash
# scripts/build-wheel.sh OUTDIR [--sdist] [all | GOOS/GOARCH ...]
#
# Builds dagrun_torch wheels into OUTDIR, each carrying a static dagrun
# binary (CGO_ENABLED=0: import, plan, check, the simulator; the CUDA backend
# needs a -tags cuda build, see scripts/build-gpu.sh) in the wheel's scripts
# data, tagged py3-none-PLATFORM, so that `pip install dagrun_torch-*.whl` is
# all a user does (no Go, no clone). Platforms, by Go's names:
#   linux/amd64 linux/arm64 darwin/amd64 darwin/arm64   (all: every one;
#   default: this machine's), cross-compiled.
# --sdist also writes dagrun_torch-V.tar.gz, which builds its binary with Go
# when pip installs it, and says what to do where Go is missing.
#
# Needs Go and a python3 (standard library only; nothing from PyPI). Writes
# only under OUTDIR (and Go's build cache); the checkout stays as it was.
# The version is cmd/dagrun/version.go's `release`, for the binary and the
# Python package alike.
set -euo pipefail
if [[ $# -lt 1 || $1 == -* ]]; then
  sed -n '2,17s/^# \{0,1\}//p' "$0" >&2
  [[ ${1:-} == -h || ${1:-} == --help ]] && exit 0
  exit 2
fi
# OUTDIR must be a folder, or a path where one can be made: bad input exits 2, as every command's does
if ! out="$(mkdir -p -- "$1" 2>&1 && cd -- "$1" && pwd)"; then
  echo "build-wheel.sh: OUTDIR $1: ${out#mkdir: }; want a folder to write the wheels in" >&2
  exit 2
fi
shift
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -B python/_build/dagrun_build.py "$out" "$@"
