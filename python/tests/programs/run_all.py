"""Run every program of this folder on the GPU: for each variant, record one
run with dagrun_torch.record (OUT/traces/NAME-VARIANT.yaml), check the
trace with dagrun check (through dagrun_torch.check), count wrong outputs
over --trials runs, and run it once more under PyTorch's CUDA sanitizer
(TORCH_CUDA_SANITIZER=1, in a child process); then the same programs
through ``python3 -m dagrun_torch run`` and DAGRUN_TORCH_CHECK=1. Writes
OUT/summary.json and prints a table. Needs a GPU and a dagrun binary
(DAGRUN, PATH or Go).

    python3 python/tests/programs/run_all.py --out OUT [--trials 20] [--sleep-ms 5] [--csan]
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # python/, for dagrun_torch

import torch  # noqa: E402

from common import Context, calibrate  # noqa: E402

PROGRAMS = ["prefetch_no_wait", "prefetch_no_record", "pinned_double_buffer", "kv_cache_ring", "grad_bucket_hook",
            "ema_side_stream", "event_two_streams", "two_threads", "graph_replay_side",
            "correct_synchronize", "correct_query_poll", "correct_transitive", "correct_item_side"]


def trace_name(prog, variant):
    return "%s-%s.yaml" % (prog.replace("_", "-"), variant)


def csan_one(prog, variant, cycles, n):
    """Run once under the sanitizer (enabled at import by TORCH_CUDA_SANITIZER=1): exit 3 if it raised."""
    mod = importlib.import_module(prog)
    try:
        mod.run(variant, Context(cycles, n))
        torch.cuda.synchronize()
    except Exception as e:  # CUDASanitizerErrors at the first race it sees
        text = "\n".join(str(x) for x in getattr(e, "errors", [e]))
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        kernels = []
        for i, line in enumerate(lines):
            if line.endswith("during kernel:") and i + 1 < len(lines):
                where = [l for l in lines[i + 2:i + 12] if l.startswith("File ") and "/torch/" not in l]
                kernels.append("%s (%s) %s" % (lines[i + 1].split("(")[0], line.split(" during")[0],
                                               where[-1] if where else ""))
        print("CSAN: %s: %s" % (type(e).__name__, " AFTER ".join(kernels) or " | ".join(lines[:8])))
        print("\n".join(lines[:60]))
        return 3
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sleep-ms", type=float, default=5.0)
    ap.add_argument("--n", type=int, default=1 << 22, help="float32 elements of a device buffer")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--csan", action="store_true")
    ap.add_argument("--camera", action="store_true", help="also record camera_loop.py (60 iterations) and time its check")
    ap.add_argument("--csan-one", nargs=4, metavar=("PROGRAM", "VARIANT", "CYCLES", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.csan_one:
        return csan_one(a.csan_one[0], a.csan_one[1], int(a.csan_one[2]), int(a.csan_one[3]))
    from dagrun_torch.checker import check
    from dagrun_torch.recorder import record
    tdir = os.path.join(a.out, "traces")
    os.makedirs(tdir, exist_ok=True)
    cycles = calibrate(a.sleep_ms)
    c = Context(cycles, a.n)
    progs = [p for p in PROGRAMS if not a.only or p in a.only]
    rows = []
    for p in progs:
        mod = importlib.import_module(p)
        for v in mod.VARIANTS:
            row = {"program": p, "variant": v, "title": (mod.__doc__ or "").strip().splitlines()[0]}
            rows.append(row)
            path = os.path.join(tdir, trace_name(p, v))
            try:
                mod.run(v, c)  # warm up
                t0 = time.time()
                with record(path) as rec:
                    row["recorded_run_ok"] = mod.run(v, c)
                row["record_s"] = round(time.time() - t0, 3)
                row["stages"] = len(rec.builder.stages)
                wrong = 0
                t0 = time.time()
                for _ in range(a.trials):
                    wrong += 0 if mod.run(v, c) else 1
                row["wrong"], row["trials"], row["trials_s"] = wrong, a.trials, round(time.time() - t0, 2)
                t0 = time.time()
                res = check(path)
                row["check_s"] = round(time.time() - t0, 3)
                row["dagrun"] = "ok" if res.ok else "race"
                row["races"] = len(res.races)
                row["fixes"] = list(res.fixes)
                row["report"] = res.report()
            except Exception as e:
                row["error"] = "%s: %s" % (type(e).__name__, e)
                row["traceback"] = traceback.format_exc()[-3000:]
            print("%-22s %-8s wrong %s/%s dagrun %s %s" % (p, v, row.get("wrong"), row.get("trials"), row.get("dagrun"),
                                                          row.get("error", "")), flush=True)
            if row.get("report"):
                print(row["report"], flush=True)

    camera = []
    if a.camera:
        import camera_loop
        net = camera_loop.model()
        bounds = {"racy": {}, "fixed": {}, "racy-last5": {"max_iterations": 5}, "racy-ring2000": {"max_ops": 2000}}
        for v, bound in bounds.items():
            path = os.path.join(tdir, trace_name("camera_loop", v))
            entry = {"variant": v, "bound": bound}
            try:
                camera_loop.run(v.split("-")[0], c, net)
                t0 = time.time()
                with record(path, **bound) as rec:
                    camera_loop.run(v.split("-")[0], c, net)
                    t1 = time.time()
                entry["record_s"] = round(t1 - t0, 2)
                entry["write_s"] = round(time.time() - t1, 2)
                entry["stages"] = len(rec.builder.stages)
                entry["bytes"] = os.path.getsize(path)
                t0 = time.time()
                r = subprocess.run([sys.executable, "-m", "dagrun_torch", "check", path], capture_output=True, text=True,
                                   env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(HERE))))
                entry["check_wall_s"] = round(time.time() - t0, 2)
                entry["check_exit"] = r.returncode
                entry["check_lines"] = len((r.stdout + r.stderr).splitlines())
                entry["check_output"] = (r.stdout + r.stderr)[-6000:]
                t0 = time.time()
                with torch.no_grad():
                    camera_loop.run(v.split("-")[0], c, net)
                entry["unrecorded_run_s"] = round(time.time() - t0, 2)
            except Exception as e:
                entry["error"] = "%s: %s" % (type(e).__name__, e)
                entry["traceback"] = traceback.format_exc()[-3000:]
            camera.append(entry)
            print("camera_loop %s: %s" % (v, {k: x for k, x in entry.items() if k not in ("check_output", "traceback")}),
                  flush=True)
            print(entry.get("check_output", ""), flush=True)

    # the command line: python3 -m dagrun_torch run, and DAGRUN_TORCH_CHECK=1
    cli = []
    root = os.path.dirname(os.path.dirname(HERE))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for p, v, want in (("two_threads", "racy", 1), ("two_threads", "fixed", 0), ("graph_replay_side", "racy", 1),
                       ("graph_replay_side", "fixed", 0), ("correct_query_poll", "correct", 0)):
        if p not in progs:
            continue
        script = os.path.relpath(os.path.join(HERE, p + ".py"))
        cmd = [sys.executable, "-m", "dagrun_torch", "run", script, v]
        t0 = time.time()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        cli.append({"command": "python3 -m dagrun_torch run %s %s" % (script, v), "exit": r.returncode, "want": want,
                    "seconds": round(time.time() - t0, 2), "output": (r.stdout + r.stderr)[-4000:]})
        print("run %s %s: exit %d (want %d)" % (p, v, r.returncode, want), flush=True)
    for p, v, want in (("two_threads", "racy", "RACE"), ("two_threads", "fixed", "ok: no race")):
        if p not in progs:
            continue
        code = ("import dagrun_torch, sys; sys.path.insert(0, %r); sys.argv = ['%s', '%s']; import %s as m; "
                "m.main(m.run, m.VARIANTS)" % (HERE, p, v, p))
        r = subprocess.run([sys.executable, "-c", code], env=dict(env, DAGRUN_TORCH_CHECK="1"), capture_output=True,
                           text=True, timeout=300)
        cli.append({"command": "DAGRUN_TORCH_CHECK=1 %s %s" % (p, v), "exit": r.returncode, "want": want,
                    "found": want in r.stderr, "output": (r.stdout + r.stderr)[-4000:]})
        print("DAGRUN_TORCH_CHECK=1 %s %s: %s" % (p, v, "says " + want if want in r.stderr else "MISSING " + want), flush=True)

    if a.csan:
        procs = []
        for r in rows:
            cmd = [sys.executable, os.path.abspath(__file__), "--out", a.out, "--csan-one", r["program"], r["variant"],
                   str(cycles), str(a.n)]
            procs.append((r, subprocess.Popen(cmd, env=dict(env, TORCH_CUDA_SANITIZER="1"), stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)))
        for r, pr in procs:
            try:
                out, _ = pr.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                pr.kill()
                out, _ = pr.communicate()
            said = [l for l in out.splitlines() if l.startswith("CSAN: ")]
            r["csan"] = "race" if pr.returncode == 3 else "ok" if pr.returncode == 0 else "error %s" % pr.returncode
            r["csan_output"] = said[-1] if said else out.strip()[-1500:]
            r["csan_full"] = out[-6000:]
            print("CSAN %-22s %-8s %s %s" % (r["program"], r["variant"], r["csan"], r["csan_output"][:300]), flush=True)

    note = "%s, torch %s, CUDA %s: %.1f ms sleep (%d cycles), %d float32 per device buffer, %d trials" % (
        torch.cuda.get_device_name(), torch.__version__, torch.version.cuda, a.sleep_ms, cycles, a.n, a.trials)
    print(note)
    print("| program | variant | wrong outputs | dagrun check | races | fixes | PyTorch CSAN |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s of %s | %s | %s | %s | %s |" % (r["program"], r["variant"], r.get("wrong"), r.get("trials"),
                                                          r.get("dagrun", r.get("error", "")[:60]), r.get("races"),
                                                          len(r.get("fixes") or []), r.get("csan", "-")))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"note": note, "rows": rows, "cli": cli, "camera": camera}, f, indent=1)
    bad = [r for r in rows if "error" in r or (r["variant"] == "racy") != (r.get("dagrun") == "race")
           or (r["variant"] != "racy" and r.get("wrong"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
