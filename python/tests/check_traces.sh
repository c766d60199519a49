#!/usr/bin/env bash
# dagrun check on the traces recorded on the GPU (testdata/traces: the bug
# patterns; testdata/programs: python/tests/programs): every *-racy.yaml must
# be flagged (exit 1), every other trace accepted (exit 0). Needs no Python.
#   python/tests/check_traces.sh [DAGRUN]     (default: go run ./cmd/dagrun)
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ge 1 ]; then dagrun=("$1"); else go build -o .cache/dagrun-check ./cmd/dagrun && dagrun=(.cache/dagrun-check); fi
fail=0
traces=(python/tests/testdata/traces/*.yaml python/tests/testdata/programs/*.yaml)
for f in "${traces[@]}"; do
  "${dagrun[@]}" check "$f" >/dev/null 2>&1; rc=$?
  case "$f" in *-racy.yaml) want=1 ;; *) want=0 ;; esac
  if [ "$rc" != "$want" ]; then echo "FAIL $f: dagrun check exited $rc, want $want"; fail=1; fi
done
[ $fail = 0 ] && echo "ok: ${#traces[@]} traces"
exit $fail
