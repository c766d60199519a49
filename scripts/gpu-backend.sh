#!/bin/bash
# torch.compile(model, backend="dagrun") on a GPU, in one command from the checkout, within
# 330 s of wall time on an H100 by default: a smoke test (graph breaks, verify, a new input shape,
# autograd's fallback; at most 40 s), then bench --backend with what is left of 300 s: per
# model, torch.compile default, reduce-overhead and backend="dagrun", each compiled cold (its
# own empty Inductor/Triton cache): median ms, peak memory during compile and in steady
# replay, memory held, compile time. Models that the budget cannot hold are skipped and
# listed (a model costs three cold compiles); MODELS overrides the list, BUDGET_S the 300 s
# (the hard limit is BUDGET_S + 30 s), SMOKE=0 leaves the smoke test out.
#   DAGRUN=.gpu/dagrun bash scripts/gpu-backend.sh [OUT]
# OUT: where bench writes backend.json, backend.md and run.log (default $OUT, else bench-out).
# Exits with bench's status (1: a model failed; 124: past the hard limit), after the last line.
# Needs torch with CUDA, torchvision, timm and transformers, and Go or DAGRUN set to a dagrun
# binary. The backend is found through its entry point: the script writes a dist-info folder
# with the wheel's entry_points.txt (python/_build/dagrun_build.py) on PYTHONPATH, as pip
# install does.
set -eo pipefail
start=$SECONDS
cd "$(dirname "$0")/.."
out=${1:-${OUT:-bench-out}}
models=${MODELS:-"googlenet bert-base moe-1 moe-8 resnet50 inception_v3 densenet121 inception_v4 nasnetalarge"}
mkdir -p "$out"
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
budget=${BUDGET_S:-300}
if [ "${SMOKE:-1}" != 0 ]; then
    echo "== smoke test"
    timeout 40 python3 python/tests/gpu_backend_smoke.py 2>&1 | grep --line-buffered -v "Warning\|warnings.warn" | tail -30 ||
        echo "smoke test: failed or past 40 s (rc ${PIPESTATUS[0]})"
fi
left=$((budget - (SECONDS - start)))
echo "== bench --backend: budget $left s, models $models"
# the budget is checked before each model; the hard limit keeps a model that overruns its estimate
# from passing BUDGET_S + 30 s (backend.json holds every model finished before it)
timeout $((left + 20)) python3 -m dagrun_torch bench --backend --models $models --iters 50 --verify-trials 1 \
    --budget-s "$left" --out "$out" 2>&1 | grep --line-buffered -v "UserWarning\|warnings.warn" | tee "$out/run.log" ||
    { rc=${PIPESTATUS[0]}; echo "bench: exit $rc (1: a model failed, named above; 124: past its time limit)"; }
echo "== done in $((SECONDS - start)) s; results in $out/backend.md and $out/backend.json"
exit "${rc:-0}"
