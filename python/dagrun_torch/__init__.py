"""dagrun_torch: the PyTorch side of dagrun.

- ``torch.compile(model, backend="dagrun")``: Inductor's kernels planned over
  streams and replayed as one CUDA graph (``dagrun_torch.backend``; the
  wheel registers it through the ``torch_dynamo_backends`` entry point).
- ``export(model, inputs)``: the model's operator graph for ``dagrun import``.
- ``compile(model, inputs, max_streams=None, strategy="default", mode="graph", verify=False)``:
  a callable that runs every node on its dagrun-planned stream, captured once
  as a multi-stream CUDA graph.
- ``record("trace.yaml")``: a context manager that writes what a multi-stream
  program did as a hand-synchronized dagrun spec; ``check("trace.yaml")``
  runs ``dagrun check`` on it and says, in the program's terms, which
  synchronization to add where.

``DAGRUN_TORCH_CHECK=1`` in the environment records the whole process from
``import dagrun_torch`` on and checks it at exit (``python3 -m dagrun_torch
run script.py ...`` does the same with an exit status; see launch.py).

Planning and verification are the dagrun binary's: the one the wheel
installs beside it, else the DAGRUN environment variable, PATH, or built
with Go from a checkout (``find_dagrun``).
"""
from ._binary import DagrunError, DagrunNotFound, find_dagrun, run_dagrun, wheel_binary
from ._version import __version__
from .plan import Plan, PlanError, lower

__all__ = ["export", "compile", "record", "check", "Plan", "PlanError", "lower", "DagrunError",
           "DagrunNotFound", "find_dagrun", "run_dagrun", "wheel_binary", "ExportError", "Exported", "CompiledModel",
           "VerificationError", "RecordError", "TraceBuilder", "CheckResult", "step"]


_LAZY = {
    "export": ("exporter", "export"), "ExportError": ("exporter", "ExportError"), "Exported": ("exporter", "Exported"),
    "compile": ("runner", "compile"), "CompiledModel": ("runner", "CompiledModel"),
    "VerificationError": ("runner", "VerificationError"),
    "record": ("recorder", "record"), "RecordError": ("recorder", "RecordError"), "TraceBuilder": ("recorder", "TraceBuilder"),
    "check": ("checker", "check"), "CheckResult": ("checker", "CheckResult"),
    "step": ("recorder", "step"),
}


def __getattr__(name):
    # torch is imported only when a part that needs it is asked for, so that
    # the plan and check parts work (and their tests run) without torch.
    import importlib
    if name not in _LAZY:
        # a submodule (dagrun_torch.backend.compiled_graphs(), ...) without its own import
        import importlib.util
        if name.startswith("_") or importlib.util.find_spec("." + name, __name__) is None:
            raise AttributeError("module 'dagrun_torch' has no attribute %r" % name)
        return importlib.import_module("." + name, __name__)
    mod, attr = _LAZY[name]
    v = getattr(importlib.import_module("." + mod, __name__), attr)
    globals()[name] = v
    return v


def _start_from_env():
    import os
    if os.environ.get("DAGRUN_TORCH_CHECK", "") not in ("", "0"):
        from .launch import start_from_env
        start_from_env()


_start_from_env()
