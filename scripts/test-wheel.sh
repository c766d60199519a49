#!/usr/bin/env bash
# scripts/test-wheel.sh [PYTHON]   (scripts/test.sh runs it)
#
# The PyTorch user's path: build the dagrun_torch wheel for this machine
# (scripts/build-wheel.sh), install it with pip into a fresh virtual
# environment of PYTHON (default /usr/bin/python3; --system-site-packages, so
# that a torch installed there is seen), offline (--no-index), on a PATH
# without Go and without any other dagrun, and run the Python tests that need
# no GPU against the installed package (from a copy of the tests outside the
# checkout, so python/ is not on sys.path), `check` of the recorded traces
# with the wheel's binary, the sdist built by pip with and without Go, and
# that the builds leave the checkout as it was.
# Everything goes to a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-/usr/bin/python3}"
repo="$PWD"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tree() { git status --porcelain --ignored -- python scripts 2>/dev/null || true; }
before="$(tree)"
scripts/build-wheel.sh "$tmp/dist" --sdist >/dev/null
whl=("$tmp"/dist/dagrun_torch-*.whl)
"$py" -m venv --system-site-packages "$tmp/venv"
# The user's shell: the venv's scripts and the system's, nothing else.
clean=(env -i HOME="$tmp/home" LANG=C.UTF-8 PATH="$tmp/venv/bin:/usr/bin:/bin" PIP_NO_INDEX=1
  PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1)
if go=$("${clean[@]}" sh -c 'command -v go'); then
  echo "test-wheel.sh: go is on the user's PATH at $go; this test needs a PATH without it" >&2
  exit 1
fi
"${clean[@]}" python -m pip install -q --no-index --no-deps "${whl[@]}"
dagrun="$tmp/venv/bin/dagrun"
[[ $("${clean[@]}" sh -c 'command -v dagrun') == "$dagrun" ]] || { echo "test-wheel.sh: the wheel installed no $dagrun" >&2; exit 1; }
"${clean[@]}" dagrun-torch --version
mkdir "$tmp/home" "$tmp/t"
cp -r python/tests "$tmp/t/tests"
(cd "$tmp/t" && "${clean[@]}" DAGRUN_TORCH_TEST_INSTALLED=1 DAGRUN_TORCH_TEST_REPO="$repo" python -m pytest -q -p no:cacheprovider --rootdir "$tmp/t" tests)
python/tests/check_traces.sh "$dagrun"
# The recorded traces through the installed command: a race exits 1, its fixed twin 0.
t=python/tests/testdata/traces
rc=0; "${clean[@]}" python -m dagrun_torch check "$PWD/$t/vllm-d2h-read-racy.yaml" >/dev/null || rc=$?
[[ $rc -eq 1 ]] || { echo "test-wheel.sh: check of a racy trace exited $rc, want 1" >&2; exit 1; }
"${clean[@]}" python -m dagrun_torch check "$PWD/$t/vllm-d2h-read-fixed.yaml" >/dev/null
# The sdist: pip builds its wheel (binary included) where Go is, offline from
# Go's module cache, and says what to do where Go is not.
GOPROXY=off PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip wheel -q --no-deps \
  -w "$tmp/sdist-wheel" "$tmp"/dist/dagrun_torch-*.tar.gz
"$tmp/venv/bin/python" -c 'import sys, zipfile
sys.exit(not any(n.endswith(".data/scripts/dagrun") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$tmp"/sdist-wheel/*.whl ||
  { echo "test-wheel.sh: the wheel pip built from the sdist carries no dagrun binary" >&2; exit 1; }
if "${clean[@]}" python -m pip wheel -q --no-deps -w "$tmp/nogo" "$tmp"/dist/dagrun_torch-*.tar.gz >"$tmp/nogo.log" 2>&1 ||
  ! grep -q 'needs Go' "$tmp/nogo.log"; then
  echo "test-wheel.sh: pip built the sdist without Go, or did not say Go is needed:" >&2
  cat "$tmp/nogo.log" >&2
  exit 1
fi
# The builds leave the checkout as it was (no python/build, egg-info, dist).
if [[ "$(tree)" != "$before" ]]; then
  echo "test-wheel.sh: building the wheel changed the checkout:" >&2
  diff <(echo "$before") <(tree) >&2 || true
  exit 1
fi
echo "ok: the wheel installs and works offline without Go; the sdist builds with Go and says what to do without; the checkout is as it was"
