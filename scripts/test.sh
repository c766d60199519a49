#!/usr/bin/env bash
# The project's test command (README, line 2; .ci/run calls it).
# Needs Go ≥ 1.26 and network access to the Go module proxy.
#
# Cold (empty Go caches, nothing installed), it first downloads the Go
# modules; where /usr/bin/python3 lacks pytest, torch, torchvision or venv
# and the shell is root on Debian/Ubuntu, it installs python3-pytest
# python3-torch python3-torchvision python3-venv with apt-get. It says so
# before each of these. Outside the clone it writes only Go's module and
# build caches, what apt-get installs, and temporary folders it removes.
#
# The cuda-tagged vet/compile step (no GPU needed) runs where CUDA headers
# are at hand: DAGRUN_CUDA_INCLUDE (and DAGRUN_CUDA_LIB) naming a CUDA
# 11.x/12.x toolkit, or headers fetched before into .cache/cuda. Fetching
# them is a step of its own, off unless asked for with DAGRUN_CUDA_FETCH=yes
# (as .ci/run does): it adds an apt source
# (/etc/apt/sources.list.d/dagrun-nonfree.sources, Debian contrib non-free)
# and downloads Debian's nvidia-cuda-dev (about 775 MB, once) to keep two
# headers and a driver stub (scripts/build-gpu.sh says how). Otherwise the
# step prints one SKIPPED line saying how to turn it on.
#
# The Python tests run where /usr/bin/python3 has pytest, from the checkout
# and then against the wheel installed as a user installs it
# (scripts/test-wheel.sh: offline, in a temporary virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."
fetch="${DAGRUN_CUDA_FETCH:-no}"
echo "== scripts/test.sh writes outside this clone: Go's caches ($(go env GOMODCACHE), $(go env GOCACHE)) and temporary folders it removes"
if [[ $fetch == yes ]]; then
  echo "== DAGRUN_CUDA_FETCH=yes: where no CUDA headers are at hand, the cuda step adds the apt source /etc/apt/sources.list.d/dagrun-nonfree.sources and downloads nvidia-cuda-dev (about 775 MB) to keep cuda.h, nvtx3/ and libcuda.so in .cache/cuda"
fi
echo "== go mod tidy -diff (go.mod and go.sum tidy)"
go mod tidy -diff
echo "== go vet"
go vet ./...
echo "== go test"
go test ./...
echo "== go test -race (simulator, executor, the loader, API)"
go test -race ./executor/... ./cudart/... ./dag .
echo "== cuda build: vet and compile with -tags cuda (no GPU needed)"
why="$(mktemp)"
trap 'rm -f "$why"' EXIT
rc=0
cuda_env="$(DAGRUN_CUDA_FETCH="$fetch" scripts/build-gpu.sh --headers-only 2>"$why")" || rc=$?
if [[ $rc -eq 3 ]]; then
  echo "SKIPPED the cuda compile check: $(sed 's/^build-gpu.sh: //' "$why")"
else
  cat "$why" >&2
  [[ $rc -eq 0 ]] || exit "$rc"
  eval "$cuda_env"
  go vet -tags cuda ./cudart/ ./executor/...
  go build -tags cuda ./...
  go test -c -tags cuda -o /dev/null ./cudart
fi
echo "== python: dagrun_torch's CPU tests (Debian's torch; the GPU tests run on a GPU machine)"
py=/usr/bin/python3
pkgs="python3-pytest python3-torch python3-torchvision python3-venv"
if ! "$py" -c 'import pytest, torch, torchvision, ensurepip' 2>/dev/null && command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
  echo "installing $pkgs with apt-get (Debian's packages, about 1 GB with their dependencies)" >&2
  apt-get install -y -qq $pkgs >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $pkgs >/dev/null 2>&1; } || true
fi
if "$py" -c 'import pytest' 2>/dev/null; then
  mkdir -p .cache
  go build -o .cache/dagrun-py ./cmd/dagrun
  DAGRUN="$PWD/.cache/dagrun-py" "$py" -m pytest -q -p no:cacheprovider python/tests
  python/tests/check_traces.sh .cache/dagrun-py
  echo "== python: the wheel as a user installs it (pip, offline, a fresh virtual environment, no Go or dagrun on PATH)"
  if "$py" -c 'import ensurepip' 2>/dev/null; then
    scripts/test-wheel.sh "$py"
  else
    echo "SKIPPED the installed-wheel test: $py cannot make a virtual environment (install python3-venv)" >&2
  fi
else
  echo "SKIPPED: $py has no pytest (install python3-pytest python3-torch python3-torchvision); the recorded traces are still checked by go test ./cmd/dagrun" >&2
fi
echo "== all tests passed"
