"""Record a whole program and check it at exit, the way PyTorch's CUDA
sanitizer is started (``TORCH_CUDA_SANITIZER=1``):

    python3 -m dagrun_torch run [--trace T.yaml] [--max-ops N] [--max-iterations N] script.py ARGS...
    DAGRUN_TORCH_CHECK=1 python3 script.py ARGS...     # the script imports dagrun_torch

``run`` runs the script as ``__main__`` (``sys.argv`` is the script and its
arguments) inside ``dagrun_torch.record``, then checks the trace with
``dagrun check`` and prints the report on stderr. Exit status: the
script's own if it failed, else 1 if the trace has a race, 2 if nothing
was recorded or the trace could not be checked, else 0.

With ``DAGRUN_TORCH_CHECK=1`` in the environment, ``import dagrun_torch``
starts recording the process, and at exit (``atexit``) the trace is
checked and the report printed on stderr; the exit status stays the
program's (use ``run`` for a status). Without CUDA it says so on stderr
and records nothing. ``DAGRUN_TORCH_TRACE=PATH`` keeps the trace (else it
is written to a temporary file and removed); ``DAGRUN_TORCH_MAX_OPS=N`` and
``DAGRUN_TORCH_MAX_ITERATIONS=N`` bound it (``dagrun_torch.step()`` begins
an iteration), for a long-running server.
"""
from __future__ import annotations

import argparse
import atexit
import os
import runpy
import sys
import tempfile
from typing import Any, List, Optional, Tuple

from . import _cli
from ._cli import positive as _positive

__all__ = ["run_script", "main", "start_from_env"]


def _trace_path(trace: Optional[str]) -> Tuple[str, bool]:
    """The trace's path and whether it is a temporary file to remove."""
    if trace:
        return trace, False
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="dagrun_torch-trace-")
    os.close(fd)
    return path, True


def _check_and_report(path: str, out: Any, dagrun: Optional[str] = None) -> int:
    """dagrun check of the trace, the report on ``out``: 0 clean, 1 a race, 2 not checked."""
    from ._binary import DagrunError, DagrunNotFound
    from .checker import check
    try:
        res = check(path, dagrun=dagrun)
    except (DagrunError, DagrunNotFound, OSError) as e:
        print("dagrun_torch: the trace could not be checked: %s" % e, file=out)
        return 2
    print("dagrun_torch: %s" % ("ok: no race" if res.ok else "RACE"), file=out)
    if not res.ok or res.warnings:
        print(res.report(), file=out)
    return 0 if res.ok else 1


def run_script(script: str, args: List[str], trace: Optional[str] = None, max_ops: Optional[int] = None,
               max_iterations: Optional[int] = None, check: bool = True, out: Any = None,
               _backend: Any = None) -> int:
    """Run ``script`` with ``args`` as ``__main__`` inside a recording, then
    check it; returns the exit status described in the module's doc."""
    from .recorder import RecordError, record, stop_env_recording
    out = out if out is not None else sys.stderr
    stop_env_recording()
    path, temporary = _trace_path(trace)
    code = 0
    argv, path0 = sys.argv, sys.path[0]
    sys.argv = [script] + list(args)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        try:
            with record(path, name=os.path.splitext(os.path.basename(script))[0], max_ops=max_ops,
                        max_iterations=max_iterations, _backend=_backend):
                try:
                    runpy.run_path(script, run_name="__main__")
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                    if not isinstance(e.code, (int, type(None))):
                        print(e.code, file=out)
        except RecordError as e:
            print("dagrun_torch: %s" % e, file=out)
            return code or 2
        if code:
            return code
        if not check:
            return 0
        if trace:
            print("dagrun_torch: trace written to %s" % trace, file=out)
        return _check_and_report(path, out)
    finally:
        sys.argv, sys.path[0] = argv, path0
        if temporary and os.path.exists(path):
            os.remove(path)


def main(argv: Optional[List[str]] = None) -> int:
    ap = _cli.run()
    a = ap.parse_args(argv)
    if a.no_check and not a.trace:
        ap.error("--no-check without --trace would record nothing you can read: give --trace FILE")
    why = _cli.run_usage(a)
    if why:
        print(why, file=sys.stderr)
        return 2
    if not os.path.isfile(a.script):
        why = "not a regular file (a Python script to run)" if os.path.exists(a.script) else "no such file"
        print("dagrun_torch run: %s: %s" % (a.script, why), file=sys.stderr)
        return 2
    return run_script(a.script, a.args, trace=a.trace, max_ops=a.max_ops, max_iterations=a.max_iterations,
                      check=not a.no_check)


def _env_int(env: dict, key: str) -> Optional[int]:
    v = env.get(key)
    if not v:
        return None
    try:
        return _positive(v)
    except argparse.ArgumentTypeError as e:
        raise ValueError("%s: %s" % (key, e))


def start_from_env(env: Optional[dict] = None, _backend: Any = None) -> Optional[Any]:
    """If ``DAGRUN_TORCH_CHECK`` is set (not "" or "0"), start recording the
    process and check it at exit. Returns the recording, or None (not asked
    for, or it could not start: the reason is on stderr)."""
    from .recorder import RecordError, record, set_env_recording
    env = os.environ if env is None else env
    if env.get("DAGRUN_TORCH_CHECK", "") in ("", "0"):
        return None
    try:
        max_ops, max_it = _env_int(env, "DAGRUN_TORCH_MAX_OPS"), _env_int(env, "DAGRUN_TORCH_MAX_ITERATIONS")
        path, temporary = _trace_path(env.get("DAGRUN_TORCH_TRACE"))
        rec = record(path, name=os.path.splitext(os.path.basename(sys.argv[0] or "program"))[0],
                     max_ops=max_ops, max_iterations=max_it, _backend=_backend)
        rec.__enter__()
    except (RecordError, ValueError, OSError) as e:
        print("dagrun_torch: DAGRUN_TORCH_CHECK: not recording: %s" % e, file=sys.stderr)
        return None

    def finish() -> None:
        if not rec._active:  # stopped: python3 -m dagrun_torch run records on its own
            if temporary and os.path.exists(path):
                os.remove(path)
            return
        try:
            rec.__exit__(None, None, None)
        except RecordError as e:
            print("dagrun_torch: %s" % e, file=sys.stderr)
            return
        try:
            _check_and_report(path, sys.stderr)
        finally:
            if temporary and os.path.exists(path):
                os.remove(path)
        if not temporary:
            print("dagrun_torch: trace written to %s" % path, file=sys.stderr)
    set_env_recording(rec, finish)
    atexit.register(finish)
    return rec
