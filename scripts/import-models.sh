#!/usr/bin/env bash
# Regenerates specs/models/*.yaml from a directory of operator graphs (the
# JSON of python3 -m dagrun_torch export; the eight in specs/models/ were
# traced from torchvision and timm and timed node by node on an H200).
# Usage: scripts/import-models.sh GRAPHS_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
graphs=${1:?usage: scripts/import-models.sh GRAPHS_DIR}
mkdir -p specs/models
for g in "$graphs"/*.json; do
  go run ./cmd/dagrun import "$g" -o "specs/models/$(basename "$g" .json).yaml"
done
