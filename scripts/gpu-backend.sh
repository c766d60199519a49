#!/bin/bash
# torch.compile(model, backend="dagrun") on a GPU, in one command from the checkout:
# a smoke test (graph breaks, verify, a new input shape, autograd's fallback), then
# bench --backend: per model, torch.compile default, reduce-overhead and
# backend="dagrun" (median ms, peak memory, compile time).
#   scripts/gpu-backend.sh [OUT]      (OUT: where bench writes backend.json/.md; default bench-out)
# Needs Go (or DAGRUN set to a dagrun binary), torch with CUDA, torchvision, timm and transformers.
# The backend is found through its entry point: the script writes a dist-info folder with
# the wheel's entry_points.txt (python/_build/dagrun_build.py) on PYTHONPATH, as pip install does.
set -eo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-bench-out}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$DAGRUN" ]; then
    CGO_ENABLED=0 go build -o "$tmp/dagrun" ./cmd/dagrun
    export DAGRUN=$tmp/dagrun
fi
site=$tmp/site/dagrun_torch-0.0.0.dist-info
mkdir -p "$site"
printf 'Metadata-Version: 2.1\nName: dagrun-torch\nVersion: 0.0.0\n' > "$site/METADATA"
python3 -c "
import sys; sys.path.insert(0, 'python/_build')
from pathlib import Path; import dagrun_build as d
open('$site/entry_points.txt', 'wb').write(d.entry_points(Path('python')))"
export PYTHONPATH=$PWD/python:$tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
timeout 45 python3 python/tests/gpu_backend_smoke.py 2>&1 | grep -v "Warning\|warnings.warn" | tail -30
timeout 360 python3 -m dagrun_torch bench --backend --models googlenet inception_v3 resnet50 densenet121 bert-base \
    moe-1 moe-8 inception_v4 nasnetalarge --iters 50 --verify-trials 1 --budget-s 300 --out "$out" 2>&1 |
    grep -v "UserWarning\|warnings.warn" | tail -60
