"""The command line's parsers, one per command, built without importing torch.

``python3 -m dagrun_torch CMD --help`` (and argument errors) answer from
here at once; each command's ``main`` parses with the same parser and then
imports what it needs. A command's description is its module's docstring,
read from the source file (ast), not by importing the module.
"""
from __future__ import annotations

import argparse
import ast
import math
import os
import re
from typing import Callable, Dict

# The models bench and timeline know: name → (torchvision name or timm:NAME, input size).
MODELS = {
    "googlenet": ("googlenet", 224), "inception_v3": ("inception_v3", 299), "inception_v4": ("timm:inception_v4", 299),
    "nasnetalarge": ("timm:nasnetalarge", 331), "resnet50": ("resnet50", 224), "densenet121": ("densenet121", 224),
}
# The transformer workloads bench --backend knows besides MODELS: BERT-base (batch 1, sequence 128) and
# one mixture-of-experts layer at decode batch N ("moe-N"); bench.transformer_model builds them.
TRANSFORMERS = ("bert-base", "moe-1", "moe-8")
# The stream caps bench --schedules compares (0: uncapped).
CAPS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 0)

PROG = "python3 -m dagrun_torch"
# bench's bounds on its own figures, checked before any work: timed calls per column (timeline's too), and
# the wall-time budget (s)
MAX_ITERS = 100000
MAX_BUDGET_S = 86400
# timeline's bound on its profiled replays, which one profiler trace holds in memory
MAX_REPLAYS = 1000
# patterns' bound on its GPU sleep ahead of each race (ms)
MAX_SLEEP_MS = 1000
# costmodel's bound on its kernel pairs, each captured and timed alone and together
MAX_PAIRS = 1000


def _doc(module: str, func: str = "") -> str:
    """The docstring of dagrun_torch.MODULE (or of its function FUNC)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), *module.split(".")) + ".py"
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    if func:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == func:
                return ast.get_docstring(node) or ""
        return ""
    return ast.get_docstring(tree) or ""


class _Parser(argparse.ArgumentParser):
    """argparse's parser with an argument error in one line, exit 2: what
    is wrong, and the command whose --help lists the options (not the
    whole usage, which runs to several lines)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, "%s: error: %s (`%s --help` lists its options)\n" % (self.prog, message, self.prog))


def _parser(cmd: str, description: str, epilog: str = "") -> argparse.ArgumentParser:
    return _Parser(prog="%s %s" % (PROG, cmd), description=description, epilog=epilog,
                   formatter_class=argparse.RawDescriptionHelpFormatter)


def export() -> argparse.ArgumentParser:
    ap = _parser("export", _doc("exporter"),
                 "example:\n  %s export --model resnet50 --out /tmp/resnet50.json\n"
                 "  dagrun import /tmp/resnet50.json -o /tmp/resnet50.yaml" % PROG)
    ap.add_argument("--model", required=True, help="torchvision name (resnet50), or timm:NAME")
    ap.add_argument("--out", required=True, help="graph JSON file to write (dagrun import reads it)")
    ap.add_argument("--size", type=integer, default=224, help="input height and width, pixels (default 224)")
    ap.add_argument("--batch", type=integer, default=1, help="input batch size (default 1)")
    ap.add_argument("--repeats", type=integer, default=20, help="calls per timed CUDA graph, 1 to %d (default 20)" % MAX_ITERS)
    ap.add_argument("--tracer", default="auto", choices=["auto", "fx", "export"],
                    help="torch.fx symbolic tracing, torch.export, or auto: fx, then export where fx fails (default auto)")
    ap.add_argument("--timing", default=None, choices=["graph", "events", "none"],
                    help="how each node's duration is measured: one CUDA graph per node, CUDA events, or none "
                         "(default: graph on a GPU, none on the CPU)")
    ap.add_argument("--device", default=None, choices=["cuda", "cpu"],
                    help="where the model runs while traced and timed (default: cuda when torch sees a GPU, else cpu)")
    return ap


def check() -> argparse.ArgumentParser:
    ap = _parser("check", _doc("checker", "main"),
                 "examples:\n  %s check trace.yaml\n  %s check --propose trace.yaml" % (PROG, PROG))
    ap.add_argument("traces", nargs="+", metavar="TRACE.yaml",
                    help="traces written by dagrun_torch.record (hand-synchronized dagrun specs)")
    ap.add_argument("--propose", action="store_true",
                    help="also print dagrun's plan of the trace's stages on their recorded streams (the fewest waits)")
    return ap


def costmodel() -> argparse.ArgumentParser:
    ap = _parser("costmodel", _doc("costmodel", "main"),
                 "example:\n  %s costmodel --model googlenet --out /tmp/googlenet.json" % PROG)
    ap.add_argument("--model", required=True, help="torchvision name (googlenet), or timm:NAME")
    ap.add_argument("--size", type=integer, default=224, help="input height and width, pixels (default 224)")
    ap.add_argument("--pairs", type=integer, default=24,
                    help="kernel pairs run together to measure the slowdown of concurrent kernels, 0 to %d "
                         "(default 24)" % MAX_PAIRS)
    ap.add_argument("--out", required=True, help="graph JSON file to write, with the cost model in its cost_model field")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="let cuDNN time its convolution algorithms and take the fastest (torch.backends.cudnn.benchmark)")
    return ap


def bench() -> argparse.ArgumentParser:
    ap = _parser("bench", _doc("bench"),
                 "examples:\n  %s bench --models googlenet --out /tmp/bench\n"
                 "  %s bench --schedules --models inception_v3 --out /tmp/bench\n"
                 "  %s bench --backend --models googlenet bert-base --out /tmp/bench" % (PROG, PROG, PROG))
    ap.add_argument("--models", nargs="+", default=list(MODELS),
                    help="models to time (default: all of %s; --backend also takes bert-base, moe-1 and moe-8, "
                         "when named)" % ", ".join(MODELS))
    ap.add_argument("--iters", type=integer, default=100, help="timed calls per column, 1 to %d; the median is reported (default 100)" % MAX_ITERS)
    ap.add_argument("--max-streams", type=_cap_or_auto, default=None,
                    help="stream cap of dagrun's plan (default 16; 0: none); with --backend, the backend's max_streams "
                         "option: \"auto\" (default) or a cap; not with --schedules or --inductor (their own caps)")
    ap.add_argument("--compile", dest="compile", action="store_true", default=True,
                    help="also time torch.compile (default)")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="leave torch.compile out")
    ap.add_argument("--only-compile", action="store_true", help="time eager, the one-stream graph and torch.compile only")
    from .backend import MAX_VERIFY_TRIALS   # the backend's bound, which every run shares (bench_usage)
    ap.add_argument("--verify-trials", type=integer, default=2,
                    help="runs of each plan checked against eager outputs before timing (--backend: the backend's "
                         "verify_trials, 0 for verify=False), 0 to %d (default 2)" % MAX_VERIFY_TRIALS)
    ap.add_argument("--budget-s", type=number, default=540.0,
                    help="wall-time budget, seconds, at most a day: models that do not fit are skipped and listed "
                         "(default 540)")
    ap.add_argument("--out", default="bench-out",
                    help="folder for the run's tables (default bench-out): bench.json and bench.md; --schedules: "
                         "schedules.json, schedules.md and costs.json; --inductor: inductor.json and inductor.md; "
                         "--backend: backend.json and backend.md")
    ap.add_argument("--schedules", action="store_true",
                    help="compare schedules instead: the cost model, the lower bound, every stream cap in %s (0: uncapped), "
                         "the staged (IOS) schedule and the priority order under caps 4, 16 and none, planned, predicted "
                         "and timed" % (CAPS,))
    ap.add_argument("--inductor", action="store_true",
                    help="time dagrun's plans over torch.compile's Inductor kernels against torch.compile reduce-overhead "
                         "(torch 2.9 or later: Inductor's FX wrapper)")
    ap.add_argument("--backend", action="store_true",
                    help="torch.compile default, reduce-overhead and backend=\"dagrun\" per model (also bert-base, moe-1, "
                         "moe-8: transformer workloads): median ms, peak memory, compile time; --verify-trials > 0 "
                         "verifies dagrun's graphs with injected delays at compile time")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark for every column (the one-stream baselines, the cost model and "
                         "the plans run the same cuDNN algorithms)")
    ap.add_argument("--compile-models", nargs="*", default=[],
                    help="with --schedules or --inductor: also time torch.compile reduce-overhead on these")
    return ap


def out_folder_error(path: str) -> str:
    """Why folder ``path`` cannot be made or written ("" when it can): it
    or a folder above it is a file, or the nearest that exists is not
    writable. Checks only; makes nothing."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        up = os.path.dirname(p)
        if up == p:
            break
        p = up
    if not os.path.isdir(p):
        return "%s is not a folder" % p if p != os.path.abspath(path) else "not a folder"
    if not os.access(p, os.W_OK | os.X_OK):
        return "%s is not writable" % p if p != os.path.abspath(path) else "not writable"
    return ""


def out_file_error(path: str) -> str:
    """Why file ``path`` cannot be written ("" when it can): it is a
    folder, or not writable, or its folder does not exist or is not
    writable. Checks only; writes nothing."""
    p = os.path.abspath(path)
    if os.path.isdir(p):
        return "a folder"
    if os.path.exists(p) and not os.access(p, os.W_OK):
        return "not writable"
    d = os.path.dirname(p)
    if not os.path.isdir(d):
        return "folder %s does not exist" % d
    if not os.access(d, os.W_OK | os.X_OK):
        return "folder %s is not writable" % d
    return ""


def bench_usage(args: argparse.Namespace) -> str:
    """Why bench's parsed ``args`` are no run, as one line ("" when they are
    one): two runs at once, an unknown model or one named twice, an option
    the run does not use or two that contradict, a figure out of range
    (--max-streams up to the backend's MAX_STREAMS), or an --out that cannot
    be a folder. Needs no torch: ``python3 -m dagrun_torch`` asks before
    importing it, and bench's ``main`` again."""
    from .backend import MAX_STREAMS, MAX_VERIFY_TRIALS   # the backend's bounds, which every run shares
    runs = [f for f, on in (("--schedules", args.schedules), ("--inductor", args.inductor), ("--backend", args.backend)) if on]
    if len(runs) > 1:
        return "bench: %s are different runs; give one" % " and ".join(runs)
    known = list(MODELS) + (list(TRANSFORMERS) if args.backend else [])
    for m in args.models + args.compile_models:
        if m not in known:
            if m in TRANSFORMERS:
                return "bench: model %r: only with --backend (known without it: %s)" % (m, ", ".join(known))
            return "bench: unknown model %r (known%s: %s)" % (m, " with --backend" if args.backend else "", ", ".join(known))
    for flag, ms in (("--models", args.models), ("--compile-models", args.compile_models)):
        twice = sorted({m for m in ms if ms.count(m) > 1})
        if twice:
            return "bench: %s names %s more than once; name each model once" % (flag, ", ".join(twice))
    if args.backend:
        ignored = [f for f, on in (("--no-compile", not args.compile), ("--only-compile", args.only_compile),
                                   ("--compile-models", bool(args.compile_models))) if on]
        if ignored:
            return "bench: %s: not with --backend, which times torch.compile's modes on every model" % ", ".join(ignored)
    elif runs:
        ignored = [f for f, on in (("--no-compile", not args.compile), ("--only-compile", args.only_compile)) if on]
        if ignored:
            return "bench: %s: not with %s (--compile-models names the models it compiles)" % (", ".join(ignored), runs[0])
        if args.max_streams is not None:
            return "bench: --max-streams: not with %s, which plans under stream caps of its own" % runs[0]
    else:
        if args.compile_models:
            return "bench: --compile-models: only with --schedules or --inductor (this run compiles every model)"
        if args.only_compile and not args.compile:
            return "bench: --only-compile and --no-compile contradict: the first times torch.compile, the second leaves it out"
    if args.max_streams == "auto" and not args.backend:
        return "bench: --max-streams auto: only with --backend (the backend's max_streams option); want an integer ≥ 0"
    for flag, v, low, high in (("--iters", args.iters, 1, MAX_ITERS), ("--max-streams", args.max_streams, 0, MAX_STREAMS),
                               ("--verify-trials", args.verify_trials, 0, MAX_VERIFY_TRIALS)):
        if v is None or v == "auto":
            continue
        if not low <= v <= high:   # one message for both sides, as timeline's and patterns' bounds say
            return "bench: %s %d: want an integer from %d to %d" % (flag, v, low, high)
    if not 0 < args.budget_s <= MAX_BUDGET_S:
        return "bench: --budget-s %.15g: want seconds > 0 and at most %d (a day)" % (args.budget_s, MAX_BUDGET_S)
    why = out_folder_error(args.out)
    if why:
        return "bench: --out %s: %s; want a folder to write bench's tables in" % (args.out, why)
    return ""


def run_usage(args: argparse.Namespace) -> str:
    """Why run's parsed ``args`` are no run, as one line ("" when they are
    one): no script given."""
    if not args.script:
        return "dagrun_torch run: give the Python script to run, then its arguments (`%s run --help` lists the options)" % PROG
    return ""


def patterns_usage(args: argparse.Namespace) -> str:
    """Why patterns' parsed ``args`` are no run, as one line ("" when they
    are one): --trials out of 1 to MAX_ITERS, --sleep-ms out of 0 to
    MAX_SLEEP_MS, or a buffer size (--mib, --pinned-mib) that holds fewer
    than two float32s (8 bytes)."""
    if not 1 <= args.trials <= MAX_ITERS:
        return "patterns: --trials %d: want an integer from 1 to %d" % (args.trials, MAX_ITERS)
    if not 0 <= args.sleep_ms <= MAX_SLEEP_MS:
        return "patterns: --sleep-ms %.15g: want milliseconds from 0 to %d" % (args.sleep_ms, MAX_SLEEP_MS)
    for flag, mib in (("--mib", args.mib), ("--pinned-mib", args.pinned_mib)):
        if int(mib * (1 << 20)) // 4 < 2:
            return "patterns: %s %.15g: want MiB that hold at least two float32s (8 bytes)" % (flag, mib)
    return ""


# Checks of a command's parsed arguments that need no torch (one line, "" when fine), by command.
USAGE: Dict[str, Callable[[argparse.Namespace], str]] = {"bench": bench_usage, "run": run_usage,
                                                          "patterns": patterns_usage}


def timeline() -> argparse.ArgumentParser:
    ap = _parser("timeline", _doc("timeline"),
                 "example:\n  %s timeline --models googlenet --out /tmp/timeline" % PROG)
    ap.add_argument("--models", nargs="+", default=["googlenet", "inception_v3", "inception_v4", "nasnetalarge"],
                    help="models to profile (default googlenet inception_v3 inception_v4 nasnetalarge; known: %s)"
                         % ", ".join(MODELS))
    ap.add_argument("--costs", help="cost models by model name (JSON, or .json.gz), as bench --schedules writes")
    ap.add_argument("--iters", type=integer, default=100,
                    help="unprofiled timed calls, 1 to %d; the median is reported (default 100)" % MAX_ITERS)
    ap.add_argument("--replays", type=integer, default=11,
                    help="profiled replays, 1 to %d; the one of median makespan is reported (default 11)" % MAX_REPLAYS)
    ap.add_argument("--out", default="timeline-out", help="folder for timeline.json and timeline.md (default timeline-out)")
    return ap


def patterns() -> argparse.ArgumentParser:
    ap = _parser("patterns", _doc("patterns.run"),
                 "example:\n  %s patterns --only seed-a --trials 20 --out /tmp/patterns" % PROG)
    ap.add_argument("--out", default="patterns-out", help="folder for the traces and the counts (default patterns-out)")
    ap.add_argument("--trials", type=integer, default=50,
                    help="runs of each variant, counting wrong outputs, 1 to %d (default 50)" % MAX_ITERS)
    ap.add_argument("--sleep-ms", type=number, default=2.0,
                    help="GPU sleep ahead of the work that must finish first, widening each race's window, ms, "
                         "0 to %d (default 2)" % MAX_SLEEP_MS)
    ap.add_argument("--mib", type=number, default=64.0, help="device buffer size, MiB (default 64)")
    ap.add_argument("--pinned-mib", type=number, default=1.0, help="pinned host buffer size, MiB (default 1)")
    ap.add_argument("--only", nargs="*", default=None, help="pattern names (default: all)")
    ap.add_argument("--csan", action="store_true", help="also run each variant under TORCH_CUDA_SANITIZER=1")
    ap.add_argument("--csan-one", nargs=3, metavar=("NAME", "VARIANT", "CYCLES"), help=argparse.SUPPRESS)
    return ap


# An integer in ASCII digits with an optional minus sign (what ``integer`` and ``_cap_or_auto`` take).
_INTEGER = re.compile(r"-?[0-9]+")
_WHOLE = re.compile(r"[0-9]+")
# The most digits an integer option takes: more than any bound of these commands needs (2**63 has 19),
# and far fewer than Python's limit on converting a digit string (4300 digits), past which int() raises
# an error of its own.
MAX_DIGITS = 30


def _digits(v: str, pattern: "re.Pattern[str]", want: str) -> int:
    """``v`` as an int where ``pattern`` matches it in full and it has at
    most MAX_DIGITS digits; else ArgumentTypeError, opening with ``want``."""
    if not pattern.fullmatch(v):
        raise argparse.ArgumentTypeError("%s, not %r" % (want, v))
    n = len(v.lstrip("-"))
    if n > MAX_DIGITS:
        raise argparse.ArgumentTypeError("%s of at most %d digits, not %d digits (%r)" % (want, MAX_DIGITS, n, v[:12] + "…"))
    return int(v)


def integer(v: str) -> int:
    """An integer written in ASCII digits, with an optional minus sign,
    of at most MAX_DIGITS digits (argparse type): not Python's ``int()``,
    which also takes "+4", " 4", "1_000" and other scripts' digits."""
    return _digits(v, _INTEGER, "want an integer in digits 0-9")


def positive(v: str) -> int:
    """A whole number ≥ 1 of at most MAX_DIGITS digits (argparse type)."""
    n = _digits(v, _WHOLE, "want a whole number in digits 0-9")
    if n < 1:
        raise argparse.ArgumentTypeError("want at least 1, not %d" % n)
    return n


def number(v: str) -> float:
    """A finite number written in ASCII digits, with an optional minus
    sign, decimal point and exponent ("2", "0.5", "1e-3"; argparse type):
    not Python's ``float()``, which also takes "nan", "inf", " 1", "1_0"
    and other scripts' digits."""
    if not re.fullmatch(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", v):
        raise argparse.ArgumentTypeError("want a number in digits 0-9 (like 2.5), not %r" % v)
    f = float(v)
    if math.isinf(f):
        raise argparse.ArgumentTypeError("want a finite number, not %r" % v)
    return f


def _cap_or_auto(v: str):
    """bench's --max-streams (argparse type): "auto" or an integer (bench
    checks the bounds and that "auto" comes with --backend)."""
    if v == "auto":
        return v
    return _digits(v, _INTEGER, "want \"auto\" (with --backend) or an integer ≥ 0")


def run() -> argparse.ArgumentParser:
    ap = _parser("run", _doc("launch"),
                 "examples:\n  %s run train.py --epochs 1\n  %s run --trace /tmp/t.yaml --max-iterations 4 serve.py"
                 % (PROG, PROG))
    ap.add_argument("--trace", help="keep the trace in this file (default: a temporary file, removed)")
    ap.add_argument("--max-ops", type=positive, help="keep only the last N ops (a ring)")
    ap.add_argument("--max-iterations", type=positive, help="keep only the last N iterations (begun by dagrun_torch.step())")
    ap.add_argument("--no-check", action="store_true", help="record only (with --trace)")
    ap.add_argument("script", nargs="?", help="the Python script to run as __main__")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments (its sys.argv[1:])")
    return ap


PARSERS: Dict[str, Callable[[], argparse.ArgumentParser]] = {
    "export": export, "check": check, "costmodel": costmodel, "bench": bench, "timeline": timeline,
    "patterns": patterns, "run": run,
}


def parser(cmd: str) -> argparse.ArgumentParser:
    """The parser of command CMD (a key of PARSERS)."""
    return PARSERS[cmd]()
