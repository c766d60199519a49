"""python3 -m dagrun_torch patterns [--out DIR] [--trials 50] [--sleep-ms 2] [--csan]

For every pattern and variant: record one run with dagrun_torch.record
(DIR/NAME-VARIANT.yaml), check it with ``dagrun check`` (through
dagrun_torch.check: race or ok), count wrong outputs over --trials runs
(each with a --sleep-ms GPU sleep ahead of the work that must finish first),
and with --csan run it once more under PyTorch's CUDA sanitizer
(TORCH_CUDA_SANITIZER=1, in a child process) to compare. Prints a markdown
table and writes DIR/patterns.json and DIR/patterns.md. Needs a GPU.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import List, Optional

import torch

from . import PATTERNS, Context


def _context(mib: float, pinned_mib: float, cycles: int) -> Context:
    return Context(s1=torch.cuda.Stream(), s2=torch.cuda.Stream(), cycles=cycles, n=int(mib * (1 << 20)) // 4,
                   n_pinned=int(pinned_mib * (1 << 20)) // 4, event=torch.cuda.Event(),
                   pinned=torch.empty(int(pinned_mib * (1 << 20)) // 4, pin_memory=True))


def calibrate_sleep(ms: float) -> int:
    """torch.cuda._sleep cycles that take about ``ms`` milliseconds here."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    probe = 1_000_000
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    per_ms = probe / start.elapsed_time(end)
    return int(per_ms * ms)


def _csan_one(name: str, variant: str, mib: float, pinned_mib: float, cycles: int) -> int:
    p = next(p for p in PATTERNS if p.name == name)
    c = _context(mib, pinned_mib, cycles)
    try:
        p.program(variant, c)
    except Exception as e:  # CUDASanitizerErrors, raised at the first race it sees
        text = "\n".join(str(x) for x in getattr(e, "errors", [e]))
        lines = text.splitlines()
        kernels = []
        for i, line in enumerate(lines):
            if line.strip().endswith("during kernel:") and i + 1 < len(lines):
                stream = line.split("stream")[1].split("during")[0].strip() if "stream" in line else "?"
                kernels.append("%s on stream %s" % (lines[i + 1].strip().split("(")[0], stream))
        print("CSAN: %s: %s" % (type(e).__name__, " after ".join(kernels) or (lines[0] if lines else "")))
        return 3
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    import argparse
    from .._cli import integer, out_folder_error, patterns_usage
    from .._cli import patterns as parser
    ap = parser()
    args = ap.parse_args(argv)
    why = patterns_usage(args)
    if why:
        print(why, file=sys.stderr)
        return 2
    names = [p.name for p in PATTERNS]
    unknown = [n for n in (args.only or []) + (args.csan_one or [])[:1] if n not in names]
    if unknown:
        ap.error("unknown pattern %s (known: %s)" % (", ".join(map(repr, unknown)), ", ".join(names)))
    if args.csan_one:
        name, variant, cycles = args.csan_one
        variants = next(p.variants for p in PATTERNS if p.name == name)
        if variant not in variants:
            ap.error("--csan-one: pattern %s has no variant %r (it has: %s)" % (name, variant, ", ".join(variants)))
        try:
            cycles = integer(cycles)
        except argparse.ArgumentTypeError as e:
            ap.error("--csan-one CYCLES: %s" % e)
        if cycles < 0:
            ap.error("--csan-one CYCLES: want an integer ≥ 0, not %d" % cycles)
    else:
        why = out_folder_error(args.out)
        if why:
            ap.error("--out %s: %s; want a folder to write the traces and counts in" % (args.out, why))
    if not torch.cuda.is_available():
        print("patterns: needs a GPU", file=sys.stderr)
        return 2
    if args.csan_one:
        return _csan_one(name, variant, args.mib, args.pinned_mib, cycles)
    from ..checker import check
    from ..recorder import record
    os.makedirs(args.out, exist_ok=True)
    cycles = calibrate_sleep(args.sleep_ms)
    c = _context(args.mib, args.pinned_mib, cycles)
    chosen = [p for p in PATTERNS if not args.only or p.name in args.only]
    rows = []
    for p in chosen:
        for v in p.variants:
            p.program(v, c)  # warm up
            path = os.path.join(args.out, "%s-%s.yaml" % (p.name, v))
            with record(path):
                ok_recorded = p.program(v, c)
            t0 = time.time()
            wrong = sum(0 if p.program(v, c) else 1 for _ in range(args.trials))
            dt = time.time() - t0
            res = check(path)
            rows.append({"pattern": p.name, "variant": v, "title": p.title, "source": p.source,
                         "wrong": wrong, "trials": args.trials, "dagrun": "race" if not res.ok else "ok",
                         "races": len(res.races), "fixes": res.fixes, "report": res.report(),
                         "recorded_run_ok": ok_recorded, "seconds": round(dt, 2)})
            print("%s %s: %d/%d wrong, dagrun check: %s" % (p.name, v, wrong, args.trials, rows[-1]["dagrun"]), flush=True)
    # after the trials, so that the child processes do not share the GPU with them
    csan = {}
    procs = []
    if args.csan:
        env = dict(os.environ, TORCH_CUDA_SANITIZER="1")
        for p in chosen:
            for v in p.variants:
                cmd = [sys.executable, "-m", "dagrun_torch", "patterns", "--mib", str(args.mib), "--pinned-mib",
                       str(args.pinned_mib), "--csan-one", p.name, v, str(cycles)]
                procs.append(((p.name, v), subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for key, pr in procs:
        out, _ = pr.communicate()
        said = [l for l in out.splitlines() if l.startswith("CSAN: ")]
        csan[key] = ("race" if pr.returncode == 3 else "ok" if pr.returncode == 0 else "error %d" % pr.returncode,
                     said[-1] if said else out.strip()[-300:])
    for r in rows:
        if (r["pattern"], r["variant"]) in csan:
            r["csan"], r["csan_output"] = csan[(r["pattern"], r["variant"])]
    head = "| pattern | variant | wrong outputs | dagrun check | PyTorch CSAN | source |\n|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        lines.append("| %s | %s | %d of %d | %s | %s | %s |" % (r["pattern"], r["variant"], r["wrong"], r["trials"],
                                                             r["dagrun"], r.get("csan", "—"), r["source"]))
    dev = torch.cuda.get_device_name()
    table = "\n".join(lines)
    note = ("%s, torch %s: %.0f MiB device buffers, %.0f MiB pinned buffers, a %.1f ms sleep kernel (%d cycles) "
            "ahead of the work that must finish first, %d trials each." % (dev, torch.__version__, args.mib,
                                                                          args.pinned_mib, args.sleep_ms, cycles, args.trials))
    print()
    print(note)
    print(table)
    with open(os.path.join(args.out, "patterns.json"), "w") as f:
        json.dump({"note": note, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "patterns.md"), "w") as f:
        f.write(note + "\n\n" + table + "\n")
    bad = [r for r in rows if (r["variant"] == "racy") != (r["dagrun"] == "race")]
    for r in bad:
        print("UNEXPECTED: %s %s: dagrun check says %s" % (r["pattern"], r["variant"], r["dagrun"]), file=sys.stderr)
        print(r["report"], file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
