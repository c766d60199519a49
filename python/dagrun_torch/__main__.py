"""usage: python3 -m dagrun_torch COMMAND [OPTIONS]   (or: dagrun-torch COMMAND [OPTIONS])

commands:
  export     export a torchvision/timm model's operator graph (dagrun import's JSON)
  check      dagrun check a recorded trace, with the fixes in the program's terms (exit 1 on a race)
  costmodel  measure a model's cost model on the GPU (kernel times, occupancy, contention) into its graph JSON
  bench      time models: eager, CUDA graph, torch.compile (also backend="dagrun": --backend), dagrun_torch.compile
             (exit 1 when a model failed; needs a GPU)
  timeline   where a plan's time goes on the GPU: its kernels' profiled timeline against one stream's (needs a GPU)
  patterns   record and check the multi-stream bug patterns, and count wrong outputs (needs a GPU)
  run        run a script inside dagrun_torch.record and check its trace at exit (exit 1 on a race; needs a GPU)

options:
  -h, --help     this help; COMMAND --help: the command's options
  --version      dagrun_torch's version and the dagrun binary's

examples:
  python3 -m dagrun_torch check trace.yaml
  python3 -m dagrun_torch export --model resnet50 --out /tmp/resnet50.json
  python3 -m dagrun_torch run train.py --epochs 1

Exit codes: 0 ok, 1 a race, a failed run or stdout closed, 2 bad input or usage.
"""
import sys


def version_text() -> str:
    """Two lines: dagrun_torch's version, and the dagrun binary's (from
    ``dagrun version``) with its path, or why there is none."""
    from ._version import __version__
    from ._binary import DagrunNotFound, binary_version, find_dagrun
    lines = ["dagrun_torch %s" % __version__]
    try:
        exe = find_dagrun(build=False)
        lines.append("%s (%s)" % (binary_version(exe), exe))
    except DagrunNotFound as e:
        lines.append("dagrun: %s" % e)
    return "\n".join(lines)


def main(argv=None) -> int:
    """The command line (module doc); returns the exit status. Where
    stdout is closed before all is written (its reader gone, as with
    ``| head``), exits 1 without a traceback, as dagrun's own commands do
    (Python's documentation, "Note on SIGPIPE")."""
    try:
        try:
            return _main(argv)
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()   # here, not at the interpreter's exit, where a closed pipe only prints
    except BrokenPipeError:
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # the interpreter's own flush at exit writes there
        return 1


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) > 1 and argv[0] in ("-h", "--help", "--version"):
        print("dagrun_torch: %s takes no arguments (COMMAND --help: a command's options)\n%s" % (
            argv[0], __doc__.strip().splitlines()[0]), file=sys.stderr)
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(version_text())
        return 0
    from . import _cli
    cmd, rest = argv[0], argv[1:]
    if cmd not in _cli.PARSERS:
        print("dagrun_torch: unknown command %r (want %s)\n%s" % (
            cmd, ", ".join(_cli.PARSERS), __doc__.strip().splitlines()[0]), file=sys.stderr)
        return 2
    # --help and argument errors answer here, before the command imports torch.
    args = _cli.parser(cmd).parse_args(rest)
    why = _cli.USAGE[cmd](args) if cmd in _cli.USAGE else ""
    if why:
        print(why, file=sys.stderr)
        return 2
    try:
        return _command(cmd)(rest)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "torch":
            raise
        print("dagrun_torch %s: needs PyTorch, which %s cannot import (%s); install torch for this Python "
              "(dagrun_torch uses the torch you have and installs none)" % (cmd, sys.executable, e), file=sys.stderr)
        return 2


def _command(cmd: str):
    """The ``main`` of command ``cmd``'s module (importing it imports torch
    for most commands)."""
    if cmd == "export":
        from .exporter import main as m
    elif cmd == "check":
        from .checker import main as m
    elif cmd == "bench":
        from .bench import main as m
    elif cmd == "costmodel":
        from .costmodel import main as m
    elif cmd == "timeline":
        from .timeline import main as m
    elif cmd == "patterns":
        from .patterns.run import main as m
    else:
        from .launch import main as m
    return m


if __name__ == "__main__":
    sys.exit(main())
