#!/usr/bin/env bash
# The project's test command (README, line 2; .ci/run calls it).
# Needs Go ≥ 1.26 and network access to the Go module proxy; the cuda-tagged
# vet/compile step also fetches CUDA 11.8 headers from Debian (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== go vet"
go vet ./...
echo "== go test"
go test ./...
echo "== go test -race (simulator, executor, API)"
go test -race ./executor/... ./cudart/... .
echo "== cuda build: vet and compile with -tags cuda (no GPU needed)"
eval "$(scripts/build-gpu.sh --headers-only)"
go vet -tags cuda ./cudart/ ./executor/...
go build -tags cuda ./...
go test -c -tags cuda -o /dev/null ./cudart
echo "== all tests passed"
