"""Command line: python3 -m dagrun_torch COMMAND ...

    export    export a torchvision/timm model's operator graph (dagrun import's JSON)
    check     dagrun check a recorded trace, with the fixes in the program's terms (exit 1 on a race)
    costmodel measure a model's cost model on the GPU (kernel times, occupancy, contention) into its graph JSON
    bench     time models: eager, CUDA graph, torch.compile, dagrun_torch.compile (needs a GPU)
    timeline  where a plan's time goes on the GPU: its kernels' profiled timeline against one stream's (needs a GPU)
    patterns  record and check the multi-stream bug patterns, and count wrong outputs (needs a GPU)
    run       run a script inside dagrun_torch.record and check its trace at exit (exit 1 on a race; needs a GPU)
"""
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "export":
        from .exporter import main as m
        return m(rest)
    if cmd == "check":
        from .checker import main as m
        return m(rest)
    if cmd == "bench":
        from .bench import main as m
        return m(rest)
    if cmd == "costmodel":
        from .costmodel import main as m
        return m(rest)
    if cmd == "timeline":
        from .timeline import main as m
        return m(rest)
    if cmd == "patterns":
        from .patterns.run import main as m
        return m(rest)
    if cmd == "run":
        from .launch import main as m
        return m(rest)
    print("dagrun_torch: unknown command %r (want export, check, costmodel, bench, timeline, patterns or run)" % cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
