#!/usr/bin/env bash
# dagrun check on the traces recorded on the H200: every *-racy.yaml must be
# flagged (exit 1), every *-fixed.yaml accepted (exit 0). Needs no Python.
#   python/tests/check_traces.sh [DAGRUN]     (default: go run ./cmd/dagrun)
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ge 1 ]; then dagrun=("$1"); else go build -o .cache/dagrun-check ./cmd/dagrun && dagrun=(.cache/dagrun-check); fi
fail=0
for f in python/tests/testdata/traces/*.yaml; do
  "${dagrun[@]}" check "$f" >/dev/null 2>&1; rc=$?
  case "$f" in *-racy.yaml) want=1 ;; *) want=0 ;; esac
  if [ "$rc" != "$want" ]; then echo "FAIL $f: dagrun check exited $rc, want $want"; fail=1; fi
done
[ $fail = 0 ] && echo "ok: $(ls python/tests/testdata/traces/*.yaml | wc -l) traces"
exit $fail
