#!/usr/bin/env bash
# Regenerates specs/models/*.yaml from the operator graphs in ../shared/graphs.
set -euo pipefail
cd "$(dirname "$0")/.."
graphs=${1:-../shared/graphs}
mkdir -p specs/models
for g in "$graphs"/*.json; do
  go run ./cmd/dagrun import "$g" -o "specs/models/$(basename "$g" .json).yaml"
done
