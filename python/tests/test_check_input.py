"""python3 -m dagrun_torch check refuses what is no trace, at once, with
exit 2 and one line on stderr (exit 1 means "race found"): a fifo (which
would block the read for ever), a device (/dev/zero would be read until
memory runs out), a file that is not UTF-8 (a Latin-1 byte, or a
gzip-compressed trace: it says to decompress it), and a trace
whose dagrun_torch-meta line is malformed (nested past Python's recursion
limit, or with a string a terminal would act on or show wrongly)."""
import os
import resource
import subprocess
import sys

import pytest

from conftest import HERE, TESTDATA

RACY = os.path.join(TESTDATA, "traces", "seed-a-racy.yaml")


def _limit_memory():
    # A checker that reads /dev/zero into memory stops at 2 GiB here.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_check(path, dagrun_bin=None):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    if dagrun_bin:
        env["DAGRUN"] = dagrun_bin
    try:
        return subprocess.run([sys.executable, "-m", "dagrun_torch", "check", path], capture_output=True,
                              text=True, env=env, timeout=60, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("check %s: still running after 60 s" % path)


def assert_refused(r, *words):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stdout, r.stderr)
    for w in words:
        assert w in lines[0], lines[0]
    assert r.stdout == ""


def test_fifo_refused(tmp_path):
    fifo = tmp_path / "trace.yaml"
    os.mkfifo(fifo)
    assert_refused(run_check(str(fifo)), "not a regular file")


def test_device_refused():
    assert_refused(run_check("/dev/zero"), "/dev/zero", "not a regular file")


def test_latin1_byte_refused(tmp_path, dagrun_bin):
    with open(RACY, "rb") as f:
        b = f.read()
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b.replace(b"# Check it with", b"# Caf\xe9: check it with", 1))
    assert_refused(run_check(str(p), dagrun_bin), "%s:3:" % p, "UTF-8")


def test_a_file_that_cannot_be_opened_is_one_line_naming_it_once(tmp_path):
    for path, why in ((tmp_path / "missing.yaml", "No such file or directory"),
                      (tmp_path / "file" / "x.yaml", "Not a directory")):
        (tmp_path / "file").write_text("")
        r = run_check(str(path))
        assert_refused(r)
        assert r.stderr == "%s: %s\n" % (path, why), r.stderr


def test_empty_file_refused_as_no_trace(tmp_path):
    # Not dagrun's advice for an empty spec (start from docs/spec.md's
    # example): a trace is not written by hand.
    p = tmp_path / "empty.yaml"
    p.write_text("\n  \n")
    assert_refused(run_check(str(p)), "empty.yaml: the file is empty", "dagrun_torch.record")


def test_gzip_trace_refused_with_what_to_do(tmp_path):
    # The repository keeps its largest trace gzip-compressed.
    gz = os.path.join(TESTDATA, "programs", "camera-loop-racy.yaml.gz")
    assert_refused(run_check(gz), "camera-loop-racy.yaml.gz:", "gzip-compressed", "gunzip -k")


@pytest.mark.parametrize("meta", [
    '{"stages": 5}',
    '{"stages": [{"accesses": [["b", 0]], "allocs": [1]}]}',
    '{"allocs": [{"site": "x"}], "stages": []}',
    '{"frees": [7]}',
    '{"streams": ["s"]}',
    '[1, 2',
    '"a string"',
    pytest.param('[' * 100000 + ']' * 100000, id="nested-100000-deep"),
    pytest.param('{"streams": {"s1": "\\u001b[2Jprog.py:3"}}', id="escape-in-stream-site"),
    pytest.param('{"allocs": [{"id": 0, "var": "le\\u001b]0;title\\u0007ft"}]}', id="escape-in-tensor-name"),
    pytest.param('{"stages": [{"op": "add", "site": "prog.py:\\u202e7"}]}', id="bidi-override-in-site"),
])
def test_malformed_meta_refused(tmp_path, dagrun_bin, meta):
    with open(RACY) as f:
        lines = f.read().splitlines()
    k = next(i for i, l in enumerate(lines) if l.startswith("# dagrun_torch-meta: "))
    lines[k] = "# dagrun_torch-meta: " + meta
    p = tmp_path / "meta.yaml"
    p.write_text("\n".join(lines) + "\n")
    assert_refused(run_check(str(p), dagrun_bin), "%s:%d:" % (p, k + 1), "dagrun_torch-meta")


def test_racy_trace_still_explained(dagrun_bin):
    r = run_check(RACY, dagrun_bin)
    assert r.returncode == 1 and "RACE" in r.stdout and "fix" in r.stdout, r.stdout + r.stderr


def test_path_with_escape_quoted(tmp_path, dagrun_bin):
    # A path's control characters reach the terminal escaped, as dagrun
    # prints paths: in a refusal and in the verdict's line.
    fifo = tmp_path / "f\x1b]0;title\x07.yaml"
    os.mkfifo(fifo)
    r = run_check(str(fifo))
    assert_refused(r, "\\x1b]0;title\\a.yaml", "not a regular file")
    assert "\x1b" not in r.stderr
    racy = tmp_path / "r\x1b[2J.yaml"
    with open(RACY) as f:
        racy.write_text(f.read())
    r = run_check(str(racy), dagrun_bin)
    assert r.returncode == 1 and "r\\x1b[2J.yaml\": RACE" in r.stdout, r.stdout + r.stderr
    assert "\x1b" not in r.stdout + r.stderr
