"""dagrun_torch: the PyTorch side of dagrun.

- ``export(model, inputs)``: the model's operator graph for ``dagrun import``.
- ``compile(model, inputs, max_streams=None, strategy="default", mode="graph", verify=False)``:
  a callable that runs every node on its dagrun-planned stream, captured once
  as a multi-stream CUDA graph.
- ``record("trace.yaml")``: a context manager that writes what a multi-stream
  program did as a hand-synchronized dagrun spec; ``check("trace.yaml")``
  runs ``dagrun check`` on it and says, in the program's terms, which
  synchronization to add where.

Planning and verification are the dagrun binary's (found through the DAGRUN
environment variable, PATH, or built with Go from the checkout).
"""
from ._binary import DagrunError, DagrunNotFound, find_dagrun, run_dagrun
from .plan import Plan, PlanError, lower

__version__ = "0.1.0"

__all__ = ["export", "compile", "record", "check", "Plan", "PlanError", "lower", "DagrunError",
           "DagrunNotFound", "find_dagrun", "run_dagrun", "ExportError", "VerificationError",
           "RecordError", "CheckResult"]


def __getattr__(name):
    # torch is imported only when a torch-using part is asked for, so that the
    # plan and check parts work (and their tests run) without torch.
    if name in ("export", "ExportError", "Exported"):
        from . import export as _e
        return {"export": _e.export, "ExportError": _e.ExportError, "Exported": _e.Exported}[name]
    if name in ("compile", "CompiledModel", "VerificationError"):
        from . import runner as _r
        return getattr(_r, name)
    if name in ("record", "RecordError", "TraceBuilder"):
        from . import record as _rec
        return getattr(_rec, name)
    if name in ("check", "CheckResult"):
        from . import check as _c
        return getattr(_c, name)
    raise AttributeError("module 'dagrun_torch' has no attribute %r" % name)
