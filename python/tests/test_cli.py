"""The command line: help on every option, --help without torch, --version,
and, against an installed wheel, the binary it carries."""
import os
import subprocess
import sys

import pytest

from conftest import INSTALLED, TESTDATA, package_env
from dagrun_torch import _cli


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dagrun_torch"] + list(args), capture_output=True, text=True,
                          env=env or package_env())


@pytest.mark.parametrize("cmd", sorted(_cli.PARSERS))
def test_every_option_has_help(cmd):
    ap = _cli.parser(cmd)
    for a in ap._actions:
        assert a.help, "%s %s: no help" % (cmd, "/".join(a.option_strings) or a.dest)
    assert "example" in ap.epilog, "%s: no example in its help" % cmd


@pytest.mark.parametrize("cmd", sorted(_cli.PARSERS))
def test_help_does_not_import_torch(cmd):
    code = ("import sys\nfrom dagrun_torch.__main__ import main\n"
            "try:\n    main([%r, '--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch')\n" % cmd)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=package_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("no torch"), r.stdout[-300:]
    assert "usage: python3 -m dagrun_torch %s" % cmd in r.stdout


@pytest.mark.parametrize("cmd", ["bench", "timeline", "patterns", "export"])
def test_a_command_without_torch_says_to_install_it(cmd):
    code = ("import sys\nsys.modules['torch'] = None   # import torch fails, as where it is not installed\n"
            "from dagrun_torch.__main__ import main\nsys.exit(main([%r] + sys.argv[1:]))\n" % cmd)
    extra = ["--model", "resnet50", "--out", os.devnull] if cmd == "export" else []
    r = subprocess.run([sys.executable, "-c", code] + extra, capture_output=True, text=True, env=package_env())
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("dagrun_torch %s: needs PyTorch, which %s cannot import (" % (cmd, sys.executable)), r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().endswith("install torch for this Python "
                                                                     "(dagrun_torch uses the torch you have and installs none)")


@pytest.mark.parametrize("cmd", ["bench", "timeline"])
def test_models_given_empty_is_a_usage_error(cmd):
    r = run_cli(cmd, "--models")
    assert r.returncode == 2 and "argument --models: expected at least one argument" in r.stderr, r.stderr


@pytest.mark.parametrize("cmd,argv,says", [
    ("bench", ["--max-streams", "x"], "argument --max-streams: want \"auto\" (with --backend) or an integer ≥ 0, not 'x'"),
    # past Python's 4300-digit limit of int(), which would raise its own "invalid integer value"
    ("bench", ["--iters", "9" * 5000], "argument --iters: want an integer in digits 0-9 of at most 30 digits, not 5000 "
                                       "digits ('999999999999…')"),
    ("bench", ["--max-streams", "-" + "9" * 31], "argument --max-streams: want \"auto\" (with --backend) or an integer "
                                                 "≥ 0 of at most 30 digits, not 31 digits ('-99999999999…')"),
    ("run", ["--max-ops", "9" * 31, "x.py"], "argument --max-ops: want a whole number in digits 0-9 of at most 30 "
                                             "digits, not 31 digits ('999999999999…')"),
    ("export", ["--model", "resnet50"], "the following arguments are required: --out"),
    ("check", [], "the following arguments are required: TRACE.yaml"),
])
def test_an_argument_error_is_one_line_that_names_the_help(cmd, argv, says):
    r = run_cli(cmd, *argv)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "python3 -m dagrun_torch %s: error: %s (`python3 -m dagrun_torch %s --help` lists its options)\n" % (
        cmd, says, cmd)


def test_usage_errors_exit_2():
    assert run_cli().returncode == 2
    r = run_cli("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr and "usage:" in r.stderr
    assert run_cli("check").returncode == 2
    # --version and --help take nothing after them: a word there is a mistake.
    for opt in ("--version", "--help"):
        r = run_cli(opt, "check")
        assert r.returncode == 2 and "takes no arguments" in r.stderr and "usage:" in r.stderr, (opt, r.stderr)
        assert r.stdout == ""


def test_version_prints_both(dagrun_bin):
    from dagrun_torch import __version__
    env = package_env()
    env["DAGRUN"] = dagrun_bin
    r = run_cli("--version", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "dagrun_torch " + __version__
    assert lines[1].startswith("dagrun " + __version__), lines  # one version for both
    if INSTALLED:   # the wheel's own binary comes before DAGRUN
        return
    # a DAGRUN that is not dagrun is named as such, on the second line
    env["DAGRUN"] = "/bin/true"
    r = run_cli("--version", env=env)
    assert r.returncode == 0 and r.stdout.splitlines()[1] == (
        "dagrun: /bin/true is not a dagrun binary: `/bin/true version` exited 0 printing ''"), r.stdout


def fake_dagrun(folder, name, script):
    """An executable shell script FOLDER/NAME that is not dagrun."""
    f = folder / name
    f.write_text("#!/bin/sh\n" + script)
    f.chmod(0o755)
    return str(f)


@pytest.mark.skipif(INSTALLED, reason="the installed wheel's own binary comes before DAGRUN")
@pytest.mark.parametrize("script,says", [
    ("echo 'dagrun 9.9'\nexit 1\n", "exited 1 printing 'dagrun 9.9'"),
    ("printf 'dagrun \\377\\376\\n'\n", "exited 0 printing b'dagrun \\xff\\xfe'"),   # not UTF-8
    ("printf '\\377\\n' >&2\nexit 3\n", "exited 3 printing ''"),
    ("kill -9 $$\n", "was killed by signal 9 printing ''"),
])
def test_version_with_a_dagrun_that_is_not_dagrun_says_so_in_one_line(tmp_path, script, says):
    env = package_env()
    env["DAGRUN"] = exe = fake_dagrun(tmp_path, "dagrun", script)
    r = run_cli("--version", env=env)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout.splitlines()[1:] == ["dagrun: %s is not a dagrun binary: `%s version` %s" % (exe, exe, says)]


@pytest.mark.skipif(INSTALLED, reason="the installed wheel's own binary comes before DAGRUN")
def test_a_dagrun_named_without_a_folder_is_the_file_in_the_current_folder(tmp_path):
    """DAGRUN=mydagrun is ./mydagrun, the file checked, not a search of PATH
    for that name."""
    exe = fake_dagrun(tmp_path, "mydagrun", "echo 'dagrun 0.0'\n")
    env = package_env()
    env["DAGRUN"] = "mydagrun"
    r = subprocess.run([sys.executable, "-m", "dagrun_torch", "--version"], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert (r.returncode, r.stderr) == (0, "") and r.stdout.splitlines()[1] == "dagrun 0.0 (%s)" % exe, r.stdout


@pytest.mark.parametrize("script", ["exec sleep 30\n",
                                    "echo 'dagrun 0.0'\nsleep 3 &\n"])   # its output held open by a process it started
def test_binary_version_waits_a_bounded_time(tmp_path, monkeypatch, script):
    from dagrun_torch import _binary
    exe = fake_dagrun(tmp_path, "dagrun", script)
    monkeypatch.setattr(_binary, "VERSION_TIMEOUT_S", 0.5)
    with pytest.raises(_binary.DagrunNotFound) as e:
        _binary.binary_version(exe)
    assert str(e.value) == "%s is not a dagrun binary: `%s version` did not finish in 0.5 s" % (exe, exe)


def test_binary_version_reads_a_bounded_output(tmp_path):
    """A binary that prints without end is refused after VERSION_MAX_BYTES,
    in a moment, not read for 10 s into memory."""
    from dagrun_torch import _binary
    exe = fake_dagrun(tmp_path, "dagrun", "exec yes 'dagrun 0.0'\n")
    with pytest.raises(_binary.DagrunNotFound) as e:
        _binary.binary_version(exe)
    assert str(e.value) == ("%s is not a dagrun binary: `%s version` printed more than 4096 bytes, starting "
                            "'dagrun 0.0'" % (exe, exe))
    # 4096 bytes, the most: read to the end
    exe = fake_dagrun(tmp_path, "dagrun", "printf 'dagrun 0.0'\nhead -c 4086 /dev/zero\n")
    assert _binary.binary_version(exe) == "dagrun 0.0" + "\x00" * 4086


def test_check_a_recorded_trace_and_its_fixed_twin(dagrun_bin):
    env = package_env()
    env["DAGRUN"] = dagrun_bin
    racy = run_cli("check", os.path.join(TESTDATA, "traces", "vllm-d2h-read-racy.yaml"), env=env)
    assert racy.returncode == 1, racy.stdout + racy.stderr
    fixed = run_cli("check", os.path.join(TESTDATA, "traces", "vllm-d2h-read-fixed.yaml"), env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@pytest.mark.skipif(INSTALLED, reason="the installed wheel's own binary comes before DAGRUN")
@pytest.mark.parametrize("script,says", [
    ("", "exited 0 printing ''"),                                    # prints no report
    ("echo 'dagrun 9.9'\nexit 1\n", "exited 1 printing 'dagrun 9.9'"),  # exit 1, dagrun's status of a race
    ("printf '\\377\\n'\n", "exited 0 printing b'\\xff'"),        # not UTF-8
    ("echo 1\n", "exited 0 printing '1'"),                           # JSON, but no report
    ("echo oops >&2\nexit 2\n", "exited 2 printing ''"),             # exit 2, dagrun's status of bad input
])
def test_check_with_a_dagrun_that_is_not_dagrun_says_so_in_one_line(tmp_path, script, says):
    env = package_env()
    env["DAGRUN"] = exe = fake_dagrun(tmp_path, "dagrun", script)
    trace = os.path.join(TESTDATA, "traces", "vllm-d2h-read-racy.yaml")
    r = run_cli("check", trace, env=env)
    assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
    assert r.stderr == "%s: %s is not a dagrun binary: `%s version` %s\n" % (trace, exe, exe, says)


def test_a_dagrun_that_answers_version_but_prints_no_json_is_a_dagrun_error(tmp_path):
    from dagrun_torch._binary import DagrunError, run_dagrun_json
    exe = fake_dagrun(tmp_path, "dagrun", "[ \"$1\" = version ] && echo 'dagrun 0.0' || echo hello\n")
    with pytest.raises(DagrunError) as e:
        run_dagrun_json(["plan", "x.yaml", "--json"], binary=exe)
    assert str(e.value) == "dagrun plan x.yaml --json printed no JSON object (exit status 0):\nhello"


@pytest.mark.skipif(not INSTALLED, reason="needs the installed wheel (scripts/test.sh)")
def test_installed_wheel_prefers_its_own_binary(tmp_path):
    """The wheel's binary comes before DAGRUN and PATH; the console script
    dagrun-torch works; the package is not the checkout's."""
    import dagrun_torch
    from dagrun_torch import find_dagrun, wheel_binary
    assert "site-packages" in dagrun_torch.__file__, dagrun_torch.__file__
    own = wheel_binary()
    assert own and os.path.dirname(own) == os.path.dirname(sys.executable), own
    fake = tmp_path / "dagrun"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    old = os.environ.get("DAGRUN")
    os.environ["DAGRUN"] = str(fake)
    try:
        assert find_dagrun() == own
    finally:
        if old is None:
            del os.environ["DAGRUN"]
        else:
            os.environ["DAGRUN"] = old
    script = os.path.join(os.path.dirname(sys.executable), "dagrun-torch")
    r = subprocess.run([script, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("dagrun_torch "), r.stdout + r.stderr
    assert "(%s)" % own in r.stdout


# What Python's int() or float() reads that a number option refuses: signs, spaces, underscores, other
# scripts' digits, hexadecimal, names.
NOT_DIGITS = ("+4", " 4", "4 ", "4\n", "1_000", "\u0664", "0x10", "", "nan", "inf", "-inf", "infinity")


def number_options():
    """(command, option, argparse type) of every option that takes a number."""
    return [(cmd, a.option_strings[0], a.type) for cmd in sorted(_cli.PARSERS) for a in _cli.parser(cmd)._actions
            if a.option_strings and a.type is not None]


@pytest.mark.parametrize("cmd,opt,kind", number_options())
def test_a_number_option_takes_ascii_digits_only(cmd, opt, kind, capsys):
    """Every number option of every command: digits 0-9 (and for a number
    that need not be whole, a minus, a point, an exponent), else one line
    naming the option and the value, exit 2."""
    assert kind in (_cli.integer, _cli.positive, _cli._cap_or_auto, _cli.number), kind   # not int or float
    whole = kind is not _cli.number
    for bad in NOT_DIGITS + (("4.0", "1e3", ".5") if whole else ("1e999", "1.5.2", "e3", ".")):
        with pytest.raises(SystemExit) as e:
            _cli.parser(cmd).parse_args(["%s=%s" % (opt, bad)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith("python3 -m dagrun_torch %s: error: argument %s: want " % (cmd, opt)), err
        assert err.endswith(", not %r (`python3 -m dagrun_torch %s --help` lists its options)\n" % (bad, cmd)), err
    for good, value in (("4", 4), ("0004", 4)) + (() if whole else (("2.5", 2.5), ("-.5", -0.5), ("1e-3", 1e-3),
                                                                      ("5.", 5.0), ("1E+2", 100.0))):
        assert kind(good) == value


def test_patterns_refuses_figures_that_make_no_run(capsys):
    """patterns' counts and sizes, on both sides of each bound, before
    torch: a negative sleep, no trials, a buffer too small for its checks."""
    def why(*argv):
        return _cli.patterns_usage(_cli.parser("patterns").parse_args(list(argv)))
    assert why() == ""
    for bad in ("0", "100001"):
        assert why("--trials", bad) == "patterns: --trials %s: want an integer from 1 to 100000" % bad
    assert why("--trials", "1") == why("--trials", "100000") == ""
    for bad in ("-0.5", "1000.5"):
        assert why("--sleep-ms", bad) == "patterns: --sleep-ms %s: want milliseconds from 0 to 1000" % bad
    assert why("--sleep-ms", "0") == why("--sleep-ms", "1000") == ""
    for flag in ("--mib", "--pinned-mib"):
        assert why(flag, "0.0000076") == "patterns: %s 7.6e-06: want MiB that hold at least two float32s (8 bytes)" % flag
        assert why(flag, "0.00000762939453125") == ""                # 8 bytes
    r = run_cli("patterns", "--trials", "-1")
    assert (r.returncode, r.stderr) == (2, "patterns: --trials -1: want an integer from 1 to 100000\n")


def test_patterns_csan_one_refuses_what_it_cannot_run():
    pytest.importorskip("torch")
    for argv, says in ((["nosuch", "racy", "4"], "unknown pattern 'nosuch' (known: seed-a, "),
                       (["seed-a", "race", "4"], "--csan-one: pattern seed-a has no variant 'race' (it has: racy)"),
                       (["seed-a", "racy", "+4"], "--csan-one CYCLES: want an integer in digits 0-9, not '+4'"),
                       (["seed-a", "racy", "-4"], "--csan-one CYCLES: want an integer ≥ 0, not -4")):
        r = run_cli("patterns", "--csan-one", *argv)
        assert r.returncode == 2 and r.stderr.startswith("python3 -m dagrun_torch patterns: error: " + says), r.stderr
        assert r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("cmd", ["bench", "timeline", "patterns"])
def test_an_out_folder_in_the_way_of_a_file_is_refused_before_the_gpu(cmd, tmp_path):
    """--out names a folder to write in: a file there (or above it) exits 2
    with one line naming it, on a machine with or without a GPU."""
    f = tmp_path / "file"
    f.write_text("")
    for out, why in ((f, "not a folder"), (f / "sub", "%s is not a folder" % f)):
        r = run_cli(cmd, "--out", str(out))
        assert r.returncode == 2 and "--out %s: %s; want a folder" % (out, why) in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("cmd,argv", [("bench", []), ("timeline", []), ("patterns", []),
                                      ("costmodel", ["--model", "googlenet", "--out", os.devnull])])
def test_a_command_that_needs_a_gpu_exits_2_without_one(cmd, argv):
    """Like a usage error (README's exit codes: a backend the machine lacks
    is exit 2): one line, nothing run."""
    pytest.importorskip("torch")
    code = ("import sys, torch\ntorch.cuda.is_available = lambda: False\n"
            "from dagrun_torch.__main__ import main\nsys.exit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, cmd] + argv, capture_output=True, text=True, env=package_env())
    assert (r.returncode, r.stderr, r.stdout) == (2, "%s: needs a GPU\n" % cmd, "")


def test_version_in_a_checkout_with_go_says_a_command_builds_the_binary(tmp_path, monkeypatch):
    """--version does not build dagrun: in a checkout with Go and no binary
    yet it says that the first command that needs one builds it, not to
    install Go; without Go it says what to install."""
    from dagrun_torch import _binary
    monkeypatch.setattr(_binary, "wheel_binary", lambda: None)
    monkeypatch.setattr(_binary, "_cached", None)
    monkeypatch.setattr(_binary, "_repo_root", lambda: tmp_path)
    monkeypatch.delenv("DAGRUN", raising=False)
    go = {"go": "/usr/bin/go"}
    monkeypatch.setattr(_binary.shutil, "which", lambda name: go.get(name))
    with pytest.raises(_binary.DagrunNotFound) as e:
        _binary.find_dagrun(build=False)
    assert str(e.value) == ("no dagrun binary built yet: in this checkout, the first command that needs dagrun builds "
                            "./cmd/dagrun with Go into %s; or set DAGRUN=/path/to/dagrun or put dagrun on PATH"
                            % (tmp_path / ".cache" / "dagrun_torch" / "dagrun"))
    assert not (tmp_path / ".cache").exists()
    go.clear()
    with pytest.raises(_binary.DagrunNotFound) as e:
        _binary.find_dagrun(build=False)
    assert str(e.value).startswith("no dagrun binary: install a dagrun_torch wheel") and "install Go" in str(e.value)


def test_integer_options_take_up_to_max_digits_digits():
    """MAX_DIGITS on both sides: 30 digits pass to the option's own bounds, 31 are refused."""
    assert _cli.integer("9" * _cli.MAX_DIGITS) == int("9" * 30) and _cli.integer("-" + "9" * 30) == -int("9" * 30)
    assert _cli.positive("9" * 30) == int("9" * 30) and _cli._cap_or_auto("9" * 30) == int("9" * 30)
    for f in (_cli.integer, _cli.positive, _cli._cap_or_auto):
        with pytest.raises(Exception, match="of at most 30 digits, not 31 digits"):
            f("9" * 31)


def test_bench_help_names_each_runs_files_and_the_verify_bound():
    """bench --help says which files each run writes into --out (as its
    code writes them) and --verify-trials' bound as a number."""
    import re as _re
    from dagrun_torch.backend import MAX_VERIFY_TRIALS
    helps = {a.dest: a.help for a in _cli.bench()._actions}
    src = open(os.path.join(os.path.dirname(_cli.__file__), "bench.py")).read()
    written = set(_re.findall(r'os\.path\.join\(args\.out, "([a-z]+\.(?:json|md))"\)', src))
    assert written == {"bench.json", "bench.md", "schedules.json", "schedules.md", "costs.json", "inductor.json",
                       "inductor.md", "backend.json", "backend.md"}
    assert all(f in helps["out"] for f in written), helps["out"]
    assert "0 to %d (default 2)" % MAX_VERIFY_TRIALS in helps["verify_trials"] and "MAX_" not in helps["verify_trials"]


def test_build_wheel_refuses_an_outdir_that_cannot_be_a_folder_with_exit_2(tmp_path):
    """scripts/build-wheel.sh: an OUTDIR that is a file, or under one, is bad input: exit 2, one line, before any
    build (a folder to make is made)."""
    from conftest import REPO
    script = os.path.join(REPO, "scripts", "build-wheel.sh")
    if not os.path.isfile(script):
        pytest.skip("no checkout's scripts/build-wheel.sh")
    f = tmp_path / "file"
    f.write_text("")
    for out in (f, f / "sub"):
        r = subprocess.run(["bash", script, str(out)], capture_output=True, text=True)
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert r.stderr.startswith("build-wheel.sh: OUTDIR %s: " % out) and r.stderr.endswith(
            "; want a folder to write the wheels in\n") and r.stderr.count("\n") == 1, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["file"]


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"], ["--version"]])
def test_a_closed_stdout_exits_1_without_a_traceback(argv):
    """stdout's reader gone (``| head``): exit 1 and nothing on stderr, as
    dagrun's own commands do, not Python's BrokenPipeError traceback."""
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([sys.executable, "-m", "dagrun_torch"] + argv, stdout=w_fd, stderr=subprocess.PIPE,
                           text=True, env=package_env())
    finally:
        os.close(w_fd)
    assert (p.returncode, p.stderr) == (1, ""), p.stderr
