"""Build dagrun_torch's wheels and sdist with the Python standard library alone.

Two faces, one writer:

- a PEP 517 build backend (python/pyproject.toml names it, with no build
  requirements, so pip builds offline and needs nothing from PyPI): pip
  builds a wheel for this machine from a checkout (``pip install ./python``)
  or from the sdist, building the dagrun binary with Go;
- a command, run by scripts/build-wheel.sh::

      python3 python/_build/dagrun_build.py OUTDIR [--sdist] [GOOS/GOARCH ...]

  which writes a wheel for each platform named (default: this machine's),
  cross-compiling the binary, and with ``--sdist`` the source archive.

A wheel is a platform wheel, as ruff and uv ship theirs: the Python package
and a dagrun binary built with ``CGO_ENABLED=0`` (import, plan, check, the
simulator; the CUDA backend needs a ``-tags cuda`` build) in the wheel's
scripts data (``dagrun_torch-V.data/scripts/dagrun``), tagged
``py3-none-PLATFORM``. pip installs the binary beside the environment's
other scripts, where ``dagrun_torch.find_dagrun`` looks first (sysconfig).

The version is dagrun's, ``release`` in cmd/dagrun/version.go, written into
the package's ``_version.py`` inside each archive.

Formats: binary distribution (PEP 427, the data-directory scheme of PEP 491),
core metadata 2.1 (PEP 566), platform tags (PEP 425, PEP 600, PEP 656),
source distribution (PEP 517, PEP 625). Archives are reproducible: every
entry carries the same time (SOURCE_DATE_EPOCH, else 2020-01-01).
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

NAME = "dagrun-torch"
DIST = "dagrun_torch"  # the name in file names (PEP 427: '-' becomes '_')
PACKAGE = "dagrun_torch"
SUMMARY = ("Run PyTorch models on dagrun's multi-stream plans, and check "
           "multi-stream PyTorch programs for races")
REQUIRES_PYTHON = ">=3.9"
MODULE = "module github.com/dagrun/dagrun"
GO_NEEDED = "Go 1.26 or later"

# The platforms a wheel is built for, by Go's names, and their wheel
# platform tags. The binary is static (CGO_ENABLED=0), so any glibc or musl
# Linux runs it; Go's macOS ports need macOS 12 or later.
PLATFORMS = {
    ("linux", "amd64"): ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    ("linux", "arm64"): ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    ("darwin", "amd64"): ["macosx_12_0_x86_64"],
    ("darwin", "arm64"): ["macosx_12_0_arm64"],
}

NO_GO = (
    "building dagrun_torch from source builds the dagrun binary it carries, "
    "which needs {go} (`go` on PATH; https://go.dev/dl), and Go's module "
    "proxy or a filled module cache. Without Go, install a wheel instead: "
    "`pip install dagrun_torch-{version}-py3-none-PLATFORM.whl` "
    "(scripts/build-wheel.sh in a clone of dagrun, on a machine with Go, "
    "builds wheels for Linux and macOS, amd64 and arm64).")


class BuildError(Exception):
    """A build that cannot go on; the message says what to do."""


# --- where things are -------------------------------------------------------

def _project() -> Path:
    """The Python project: the folder of pyproject.toml (python/ in a
    checkout, the top of an unpacked sdist)."""
    return Path(__file__).resolve().parent.parent


def go_root(project: Path) -> Path:
    """The Go module that holds cmd/dagrun: go/ in an sdist, the checkout
    (the folder above python/) otherwise."""
    for cand in (project / "go", project.parent):
        mod = cand / "go.mod"
        if mod.is_file() and MODULE in (l.strip() for l in mod.read_text(errors="replace").splitlines()):
            return cand
    raise BuildError("no dagrun Go module beside %s (want go/go.mod in an sdist, "
                     "or ../go.mod in a checkout of dagrun)" % project)


def version(root: Path) -> str:
    """dagrun's release, from cmd/dagrun/version.go."""
    src = (root / "cmd" / "dagrun" / "version.go").read_text()
    m = re.search(r'^const release = "([^"]+)"', src, re.M)
    if not m:
        raise BuildError("%s: no `const release = \"...\"`" % (root / "cmd" / "dagrun" / "version.go"))
    return m.group(1)


def host_target() -> tuple:
    """This machine as Go names it (GOOS, GOARCH)."""
    goos = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    goarch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    if (goos, goarch) not in PLATFORMS:
        raise BuildError("no dagrun_torch wheel for %s %s (wheels: %s)" % (
            platform.system(), platform.machine(), ", ".join("%s/%s" % p for p in PLATFORMS)))
    return goos, goarch


# --- the binary -------------------------------------------------------------

def build_binary(root: Path, goos: str, goarch: str, out: Path) -> None:
    """go build ./cmd/dagrun into out, static (CGO_ENABLED=0), for goos/goarch."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(NO_GO.format(go=GO_NEEDED, version=version(root)))
    env = dict(os.environ, CGO_ENABLED="0", GOOS=goos, GOARCH=goarch)
    # Outside a git checkout (an sdist) there is no revision to stamp.
    vcs = "-buildvcs=auto" if (root / ".git").exists() else "-buildvcs=false"
    cmd = [go, "build", "-trimpath", vcs, "-ldflags=-s -w", "-o", str(out), "./cmd/dagrun"]
    r = subprocess.run(cmd, cwd=str(root), env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError("`CGO_ENABLED=0 GOOS=%s GOARCH=%s go build ./cmd/dagrun` in %s failed:\n%s\n%s" % (
            goos, goarch, root, r.stderr.strip(), NO_GO.format(go=GO_NEEDED, version=version(root))))


# --- archives ---------------------------------------------------------------

def _epoch() -> int:
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "1577836800")), 315532800)


def _version_py(v: str, binary) -> bytes:
    return ('"""dagrun_torch\'s version: dagrun\'s (cmd/dagrun/version.go), written by\n'
            'python/_build/dagrun_build.py; BINARY is the dagrun executable this\n'
            'distribution installs in the scripts folder (None: it carries none)."""\n'
            '__version__ = %r\nBINARY = %r\n' % (v, binary)).encode()


def _package_files(project: Path):
    """(archive name, path) of every file of the Python package, sorted."""
    pkg = project / PACKAGE
    out = []
    for p in sorted(pkg.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".yaml", ".typed"):
            out.append((p.relative_to(project).as_posix(), p))
    return out


def metadata(project: Path, v: str) -> bytes:
    """Core metadata 2.1 (METADATA in a wheel, PKG-INFO in an sdist)."""
    readme = (project / "README.md").read_text()
    head = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + v,
        "Summary: " + SUMMARY,
        "License: Apache-2.0",
        "Requires-Python: " + REQUIRES_PYTHON,
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(head) + "\n\n" + readme).encode()


def entry_points(project: Path) -> bytes:
    """entry_points.txt of the wheel, from pyproject.toml's ``[project.scripts]``
    (as console_scripts) and ``[project.entry-points.GROUP]`` tables, whose
    lines are ``name = "module:attr"`` (the build reads no other TOML)."""
    groups = {}
    cur = None
    for line in (project / "pyproject.toml").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            t = line.strip("[]").strip()
            cur = "console_scripts" if t == "project.scripts" else (
                t[len("project.entry-points."):].strip('"') if t.startswith("project.entry-points.") else None)
            if cur is not None:
                groups.setdefault(cur, [])
            continue
        if cur is not None and "=" in line:
            k, v = line.split("=", 1)
            groups[cur].append("%s = %s" % (k.strip(), v.strip().strip('"')))
    return "".join("[%s]\n%s\n\n" % (g, "\n".join(lines)) for g, lines in groups.items()).encode()


class _Wheel:
    """A wheel being written: entries in order, then RECORD."""

    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []
        self.date = time.gmtime(_epoch())[:6]

    def add(self, name: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(name, date_time=self.date)
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append("%s,sha256=%s,%d" % (name, digest, len(data)))

    def close(self, record_name: str) -> None:
        self.record.append(record_name + ",,")
        info = zipfile.ZipInfo(record_name, date_time=self.date)
        info.external_attr = (0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def write_wheel(project: Path, outdir: Path, v: str, target: tuple, binary: Path) -> Path:
    """Write the wheel for target (GOOS, GOARCH) carrying binary into outdir;
    return its path."""
    tags = PLATFORMS[target]
    name = "%s-%s-py3-none-%s.whl" % (DIST, v, ".".join(tags))
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / name
    tmp = outdir / (name + ".part")
    info = "%s-%s.dist-info" % (DIST, v)
    w = _Wheel(tmp)
    try:
        for arc, p in _package_files(project):
            data = p.read_bytes()
            if arc == PACKAGE + "/_version.py":
                data = _version_py(v, "dagrun")
            w.add(arc, data)
        w.add("%s-%s.data/scripts/dagrun" % (DIST, v), binary.read_bytes(), 0o755)
        w.add(info + "/METADATA", metadata(project, v))
        wheel = ["Wheel-Version: 1.0", "Generator: dagrun_build " + v, "Root-Is-Purelib: false"]
        wheel += ["Tag: py3-none-" + t for t in tags]
        w.add(info + "/WHEEL", ("\n".join(wheel) + "\n").encode())
        w.add(info + "/entry_points.txt", entry_points(project))
        lic = _licence(project)
        if lic is not None:
            w.add(info + "/LICENSE", lic.read_bytes())
        w.close(info + "/RECORD")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _licence(project: Path):
    for p in (project / "LICENSE", project.parent / "LICENSE"):
        if p.is_file():
            return p
    return None


def _go_files(root: Path):
    """The files of the Go module that ./cmd/dagrun needs on any platform
    the wheels cover (go list; test files and testdata are left out)."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("writing the sdist lists the Go sources with `go list`, which needs " + GO_NEEDED)
    files = {"go.mod", "go.sum"}
    for goos, goarch in PLATFORMS:
        env = dict(os.environ, CGO_ENABLED="0", GOOS=goos, GOARCH=goarch)
        fmt = "{{if .Module}}{{if .Module.Main}}{{.Dir}}\t{{join .GoFiles \" \"}} {{join .IgnoredGoFiles \" \"}} {{join .EmbedFiles \" \"}}{{end}}{{end}}"
        r = subprocess.run([go, "list", "-deps", "-f", fmt, "./cmd/dagrun"], cwd=str(root), env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError("`go list -deps ./cmd/dagrun` in %s failed:\n%s" % (root, r.stderr.strip()))
        for line in r.stdout.splitlines():
            d, _, names = line.partition("\t")
            rel = Path(d).resolve().relative_to(root.resolve())
            for n in names.split():
                files.add((rel / n).as_posix())
    return sorted(files)


def write_sdist(project: Path, outdir: Path) -> Path:
    """Write dagrun_torch-V.tar.gz: the Python project, this backend, and
    under go/ the Go sources of cmd/dagrun, so that pip builds the wheel
    (binary included) wherever Go is; return its path."""
    root = go_root(project)
    v = version(root)
    base = "%s-%s" % (DIST, v)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / (base + ".tar.gz")
    entries = [("pyproject.toml", (project / "pyproject.toml").read_bytes(), 0o644),
               ("README.md", (project / "README.md").read_bytes(), 0o644),
               ("PKG-INFO", metadata(project, v), 0o644),
               ("_build/dagrun_build.py", (project / "_build" / "dagrun_build.py").read_bytes(), 0o644)]
    lic = _licence(project)
    if lic is not None:
        entries.append(("LICENSE", lic.read_bytes(), 0o644))
    for arc, p in _package_files(project):
        entries.append((arc, _version_py(v, None) if arc == PACKAGE + "/_version.py" else p.read_bytes(), 0o644))
    for rel in _go_files(root):
        entries.append(("go/" + rel, (root / rel).read_bytes(), 0o644))
    tmp = outdir / (base + ".tar.gz.part")
    try:
        with open(tmp, "wb") as f:
            with gzip.GzipFile(fileobj=f, mode="wb", mtime=_epoch(), filename="") as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    for arc, data, mode in sorted(entries):
                        ti = tarfile.TarInfo(base + "/" + arc)
                        ti.size, ti.mode, ti.mtime = len(data), mode, _epoch()
                        ti.uname = ti.gname = ""
                        tar.addfile(ti, io.BytesIO(data))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def build_binaries(project: Path, outdir: Path, targets) -> list:
    """Build the bare dagrun binary for each target into outdir as
    dagrun-V-GOOS-GOARCH (scripts/release.sh); return their paths."""
    root = go_root(project)
    v = version(root)
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for goos, goarch in targets:
        path = outdir / ("dagrun-%s-%s-%s" % (v, goos, goarch))
        tmp = outdir / (path.name + ".part")
        try:
            build_binary(root, goos, goarch, tmp)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        out.append(path)
    return out


def build(project: Path, outdir: Path, targets) -> list:
    """Build one wheel per target (GOOS, GOARCH) into outdir; return their paths."""
    root = go_root(project)
    v = version(root)
    out = []
    with tempfile.TemporaryDirectory(prefix="dagrun-wheel-") as tmp:
        for t in targets:
            binary = Path(tmp) / ("dagrun-%s-%s" % t)
            build_binary(root, t[0], t[1], binary)
            out.append(write_wheel(project, outdir, v, t, binary))
    return out


# --- PEP 517 hooks ----------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Build the wheel for this machine (its dagrun binary with Go)."""
    try:
        (path,) = build(_project(), Path(wheel_directory), [host_target()])
    except BuildError as e:
        raise SystemExit("dagrun_torch: " + str(e))
    return path.name


def build_sdist(sdist_directory, config_settings=None):
    """Write the sdist (from a checkout of dagrun, with Go to list its sources)."""
    try:
        return write_sdist(_project(), Path(sdist_directory)).name
    except BuildError as e:
        raise SystemExit("dagrun_torch: " + str(e))


# --- the command ------------------------------------------------------------

USAGE = """usage: dagrun_build.py OUTDIR [--sdist | --binaries] [all | GOOS/GOARCH ...]

Writes into OUTDIR a dagrun_torch wheel carrying a static dagrun binary for
each platform named (default: this machine's), cross-compiled with Go:
  linux/amd64 linux/arm64 darwin/amd64 darwin/arm64   (all: every one)
--sdist also writes the source archive, which builds its binary with Go.
--binaries writes the bare binaries (dagrun-V-GOOS-GOARCH) instead of wheels."""


def main(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    outdir, rest = Path(argv[0]), argv[1:]
    sdist, binaries = "--sdist" in rest, "--binaries" in rest
    names = [a for a in rest if a not in ("--sdist", "--binaries")]
    targets = []
    for a in names:
        if a == "all":
            targets += [t for t in PLATFORMS if t not in targets]
            continue
        t = tuple(a.split("/"))
        if t not in PLATFORMS:
            print("dagrun_build.py: unknown platform %r (want %s or all)" % (
                a, ", ".join("%s/%s" % p for p in PLATFORMS)), file=sys.stderr)
            return 2
        if t not in targets:
            targets.append(t)
    try:
        if not targets:
            targets = [host_target()]
        for p in (build_binaries if binaries else build)(_project(), outdir, targets):
            print(p)
        if sdist:
            print(write_sdist(_project(), outdir))
    except BuildError as e:
        print("dagrun_build.py: " + str(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
