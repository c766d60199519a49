"""Finding and calling the dagrun binary.

The Python side traces and replays; planning and verification are the Go
binary's job, called with files in between (the plan file is the contract).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

__all__ = ["DagrunError", "DagrunNotFound", "find_dagrun", "run_dagrun", "run_dagrun_json", "wheel_binary"]


class DagrunNotFound(RuntimeError):
    """No dagrun binary: install the wheel, set DAGRUN, put dagrun on PATH, or install Go."""


class DagrunError(RuntimeError):
    """A dagrun command failed.

    Attributes: ``args`` (the command line), ``returncode`` (1: a race or a
    failed run, 2: bad input), ``stdout``, ``stderr``.
    """

    def __init__(self, cmd: Sequence[str], returncode: int, stdout: str, stderr: str, what: str = ""):
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = what or {1: "failed (race or run failure)", 2: "rejected its input"}.get(
            returncode, "exited with status %d" % returncode)
        msg = "%s %s" % (" ".join(self.cmd), what)
        detail = (stderr or stdout).strip()
        if detail:
            msg += ":\n" + detail
        super().__init__(msg)


_cached: Optional[str] = None
# How long ``binary_version`` waits for ``dagrun version``, s, and the most it prints, bytes.
VERSION_TIMEOUT_S = 10
VERSION_MAX_BYTES = 4096


def _repo_root() -> Optional[Path]:
    """The dagrun checkout this package sits in (python/dagrun_torch), if any."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent, here.parent):
        gomod = cand / "go.mod"
        if gomod.is_file() and "module github.com/dagrun/dagrun" in gomod.read_text(errors="replace"):
            return cand
    return None


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def wheel_binary() -> Optional[str]:
    """The dagrun binary installed with this package from its wheel, or None
    (a checkout, or an sdist built without one).

    pip puts a wheel's scripts in the environment's scripts folder; this
    looks where sysconfig says that is (the environment's, then the user
    scheme's for ``pip install --user``), then in ``bin`` beside the package
    (``pip install --target``), as ruff's ``find_ruff_bin`` does.
    """
    from ._version import BINARY
    if not BINARY:
        return None
    exe = BINARY + (sysconfig.get_config_var("EXE") or "")
    cands = [os.path.join(sysconfig.get_path("scripts"), exe),
             os.path.join(sysconfig.get_path("scripts", scheme=_user_scheme()), exe),
             os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", exe)]
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def find_dagrun(build: bool = True) -> str:
    """Return the path of the dagrun binary.

    Looks, in order, at the binary installed with this package's wheel
    (``wheel_binary``), at the environment variable ``DAGRUN`` (a path,
    relative to the current folder where it is not absolute), at
    ``dagrun`` on ``PATH``, and, when this package sits in a dagrun checkout
    and ``go`` is on ``PATH`` (and ``build`` is true), builds
    ``./cmd/dagrun`` into ``<checkout>/.cache/dagrun_torch/dagrun`` once.

    Raises DagrunNotFound (with what to do) when none of these works; with
    ``build`` false in a checkout with Go, saying that a command builds it.
    """
    global _cached
    own = wheel_binary()
    if own:
        return own
    env = os.environ.get("DAGRUN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise DagrunNotFound("DAGRUN=%s is not an executable file" % env)
        return os.path.abspath(env)   # a bare name is the file here, as checked, not a search of PATH
    if _cached and os.path.isfile(_cached):
        return _cached
    on_path = shutil.which("dagrun")
    if on_path:
        _cached = on_path
        return on_path
    root = _repo_root()
    go = shutil.which("go")
    if build and root is not None and go is not None:
        out = root / ".cache" / "dagrun_torch" / "dagrun"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([go, "build", "-o", str(out), "./cmd/dagrun"], cwd=str(root),
                               capture_output=True, text=True)
        except OSError as e:   # a checkout it cannot write in, a go it cannot run
            raise DagrunNotFound("cannot build dagrun with `go build ./cmd/dagrun` in %s: %s" % (root, e)) from e
        if r.returncode != 0:
            raise DagrunNotFound("building dagrun with `go build ./cmd/dagrun` in %s failed:\n%s" % (root, r.stderr.strip()))
        _cached = str(out)
        return _cached
    if root is not None and go is not None:   # build is False: say that a command builds one, not to install Go
        raise DagrunNotFound(
            "no dagrun binary built yet: in this checkout, the first command that needs dagrun builds "
            "./cmd/dagrun with Go into %s; or set DAGRUN=/path/to/dagrun or put dagrun on PATH"
            % (root / ".cache" / "dagrun_torch" / "dagrun"))
    raise DagrunNotFound(
        "no dagrun binary: install a dagrun_torch wheel (it carries one: "
        "`pip install dagrun_torch-*.whl`, built by scripts/build-wheel.sh), "
        "set DAGRUN=/path/to/dagrun, put dagrun on PATH, "
        "or install Go and use this package from a dagrun checkout "
        "(`go build -o dagrun ./cmd/dagrun` builds it)")


def binary_version(exe: str) -> str:
    """The first line ``exe version`` prints ("dagrun 0.1.0, go1.26.8").
    Raises DagrunNotFound when ``exe`` does not run, takes more than
    VERSION_TIMEOUT_S (10 s), fails, prints more than VERSION_MAX_BYTES, or
    prints anything else (bytes that are not UTF-8 among them): it is not a
    dagrun binary. Reads at most VERSION_MAX_BYTES + 1 bytes of its output."""
    try:
        p = subprocess.Popen([exe, "version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        raise DagrunNotFound("%s is not a dagrun binary: `%s version` did not run (%s)" % (exe, exe, e)) from e
    deadline = time.monotonic() + VERSION_TIMEOUT_S
    read: List[bytes] = []
    reader = threading.Thread(target=lambda: read.append(p.stdout.read(VERSION_MAX_BYTES + 1)), daemon=True)
    reader.start()
    reader.join(VERSION_TIMEOUT_S)
    out = b"" if reader.is_alive() else read[0]
    try:
        if reader.is_alive():   # its output has no end yet: it hangs, or a process it started holds it open
            raise subprocess.TimeoutExpired([exe, "version"], VERSION_TIMEOUT_S)
        if len(out) <= VERSION_MAX_BYTES:
            p.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as e:
        raise DagrunNotFound("%s is not a dagrun binary: `%s version` did not finish in %g s" % (
            exe, exe, VERSION_TIMEOUT_S)) from e
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if not reader.is_alive():
            p.stdout.close()
    first = (out.strip().splitlines() or [b""])[0]
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError:
        line = None
    shown = first[:80] if line is None else line[:80]
    if len(out) > VERSION_MAX_BYTES:
        raise DagrunNotFound("%s is not a dagrun binary: `%s version` printed more than %d bytes, starting %r" % (
            exe, exe, VERSION_MAX_BYTES, shown))
    if p.returncode != 0 or line is None or not line.startswith("dagrun "):
        status = "was killed by signal %d" % -p.returncode if p.returncode < 0 else "exited %d" % p.returncode
        raise DagrunNotFound("%s is not a dagrun binary: `%s version` %s printing %r" % (exe, exe, status, shown))
    return line


def run_dagrun(args: List[str], ok_codes: Sequence[int] = (0,), binary: Optional[str] = None,
               cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run ``dagrun ARGS...`` and return the completed process (text
    output, UTF-8: bytes that are not are replaced).

    Raises DagrunError when the exit status is not in ``ok_codes``, or
    DagrunNotFound where the binary then does not answer ``dagrun version``
    (``binary_version``): it is not dagrun, and its output is no dagrun error.
    """
    exe = binary or find_dagrun()
    cmd = [exe] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, cwd=cwd)
    r.stdout, r.stderr = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    if r.returncode not in ok_codes:
        binary_version(exe)
        raise DagrunError(["dagrun"] + cmd[1:], r.returncode, r.stdout, r.stderr)
    return r


def run_dagrun_json(args: List[str], ok_codes: Sequence[int] = (0,),
                    binary: Optional[str] = None) -> Tuple[subprocess.CompletedProcess, dict]:
    """``run_dagrun(ARGS)`` for a command that prints a JSON object (ARGS
    asks for ``--json``): the completed process and the object. Raises as
    run_dagrun does, and where the output is no JSON object,
    DagrunNotFound (the binary does not answer ``dagrun version``) or
    DagrunError."""
    exe = binary or find_dagrun()
    r = run_dagrun(args, ok_codes, exe)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        binary_version(exe)
        raise DagrunError(["dagrun"] + [str(a) for a in args], r.returncode, r.stdout, r.stderr,
                          what="printed no JSON object (exit status %d)" % r.returncode)
    return r, doc
