"""Build the Debian package a table PC installs: `make deb` (README.md, "Installing on a table PC").

The program goes into a virtual environment at /usr/lib/tablectl/venv built on the target's
own Python (Debian 12: /usr/bin/python3, 3.11), with its dependencies from PyPI and nothing
else: no pip, no setuptools, no activate scripts, no other package's commands, no bytecode
(postinst compiles it, prerm removes it, as dh_python3 does), compiled extensions stripped.
/usr/bin/tablectl starts it. Beside it: the systemd unit, sysusers.d and tmpfiles.d entries,
the udev rules (every systemd/*.rules), the man page and bash/zsh completion generated from
the argparse definitions, and under /usr/share/doc/tablectl the README, docs/ (with
asyncapi.json and the diagram), the example configs and the changelogs. The dependencies on
system libraries come from what the venv loads: dpkg-shlibdeps for the compiled extensions,
libusb for pyusb (it loads libusb-1.0.so.0 at run time, which no ELF header names).
Maintainer scripts are in packaging/deb/; lintian's remaining verdicts, each with its reason,
in packaging/deb/lintian-overrides (tests/test_deb.py runs lintian on the result).

The venv is built in a staging directory and moved into place by rewriting the paths it
records (pyvenv.cfg), as dh-virtualenv does.
"""

from __future__ import annotations

import argparse
import datetime
import email.utils
import gzip
import hashlib
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "packaging"))
cli_docs = importlib.import_module("cli_docs")  # beside this file: the man page, completion

PREFIX = Path("/usr/lib/tablectl/venv")
DOC = "/usr/share/doc/tablectl"
MAINTAINER = "tablectl maintainers <tablectl@example.invalid>"
SYNOPSIS = "controller daemon for casino table-game hardware"
SCRIPTS = ("postinst", "prerm", "postrm")
# The venv's interpreter links; everything else in bin/ is pip's, venv's or another package's.
KEEP_IN_BIN = {"python", "python3"}
# Installed with the dependencies but never imported at run time: gpiozero's commands
# (pinout, pintest), and setuptools, which colorzero declares but does not import.
UNUSED_PACKAGES = (
    "gpiozerocli",
    "setuptools",
    "setuptools-*.dist-info",
    "pkg_resources",
    "_distutils_hack",
    "distutils-precedence.pth",
    # reportlab's sample fonts: the report uses the PDF standard fonts, which need no file;
    # these carry licences Debian flags (lintian: license-problem-font-adobe-*).
    "reportlab/fonts/*.pfb",
    "reportlab/fonts/*.afm",
    "reportlab/fonts/*.ttf",
    "reportlab/fonts/*.sfd",
    # The libraries' own test programs and test helpers, never imported at run time:
    # reportlab's test modules (only its renderers' self-test functions load them),
    # multidict's C-API test extension, Pillow's Tk binding (no Tk on a table PC; Debian
    # ships it apart, python3-pil.imagetk), aiohttp's test client and pytest plugin,
    # annotated-types' test cases, the stub of cryptography's test support.
    # tests/test_deb.py fails on any test module left in the package.
    "reportlab/lib/testutils.py",
    "reportlab/graphics/testshapes.py",
    "reportlab/graphics/testdrawings.py",
    "reportlab/graphics/barcode/test.py",
    "multidict/_testcapi.*",
    "PIL/_imagingtk.*",
    "PIL/ImageTk.py",
    "PIL/_tkinter_finder.py",
    "aiohttp/test_utils.py",
    "aiohttp/pytest_plugin.py",
    "annotated_types/test_cases.py",
    "cryptography/hazmat/bindings/_rust/test_support.pyi",
)
# Built from source against Debian's libraries: the PyPI wheels embed their own copies
# (pillow.libs: libjpeg, libtiff, freetype ...; lintian: embedded-library).
FROM_SOURCE = ("pillow",)
# Found with ctypes at run time, so no ELF header says so: pyusb's libusb
# (usb/backend/libusb1.py) and psycopg's libpq (psycopg/pq/_pq_ctypes.py).
RUNTIME_LIBRARIES = ("libusb-1.0-0", "libpq5")
SYSTEM_DEPENDS = ("systemd", "udev", "init-system-helpers (>= 1.54~)")


class Progress:
    """One line per step on stderr, with the time it took: `make deb` is never silent."""

    def __init__(self, steps: int) -> None:
        self.steps, self.done = steps, 0
        self.started = self.step_started = time.monotonic()

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        if self.done:
            print(f"      ({now - self.step_started:.1f} s)", file=sys.stderr, flush=True)
        self.done += 1
        self.step_started = now
        print(f"build_deb [{self.done}/{self.steps}] {what}", file=sys.stderr, flush=True)

    def finish(self, deb: Path) -> None:
        total = time.monotonic() - self.started
        size = deb.stat().st_size / 1e6
        print(f"build_deb: {deb} ({size:.1f} MB) in {total:.0f} s", file=sys.stderr, flush=True)


def run(*argv: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in argv], check=True, **kwargs)  # type: ignore[call-overload]


def output(*argv: str | Path, cwd: Path | None = None) -> str:
    return subprocess.run(
        [str(a) for a in argv], check=True, capture_output=True, text=True, cwd=cwd
    ).stdout


def metadata() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {
        "name": project["name"],
        "version": project["version"],
        "description": project["description"],
        "requires_python": project["requires-python"],
    }


def build_wheel(builder: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("tablectl-*.whl"):
        old.unlink()
    run(builder, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, REPO)
    (wheel,) = out.glob("tablectl-*.whl")
    return wheel


def create_venv(stage: Path, python: Path) -> Path:
    venv = stage / PREFIX.relative_to("/")
    # No pip and no setuptools in it: the table PC never installs anything into it.
    run(python, "-m", "venv", "--without-pip", venv)
    return venv


def install_into(venv: Path, builder: Path, wheel: Path) -> str:
    """tablectl and its dependencies, by the builder's pip; returns the venv Python's X.Y."""
    run(
        builder,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "--quiet",
        "--no-compile",
        "--no-warn-script-location",
        "--no-binary",
        ",".join(FROM_SOURCE),
        wheel,
    )
    version = output(
        venv / "bin" / "python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"
    )
    return version.strip()


def prune_venv(venv: Path, pyver: str) -> None:
    """Leave the program and the libraries it imports: no commands but the interpreter, no
    activate scripts, no bytecode, no build tools' leftovers."""
    keep = {*KEEP_IN_BIN, f"python{pyver}"}
    for path in (venv / "bin").iterdir():
        if path.name not in keep:
            path.unlink()
    # The interpreter as a relative link (/usr/lib/tablectl/venv/bin -> /usr/bin), as Debian
    # policy asks of a link within /usr; the other names link to it.
    for python in (venv / "bin").iterdir():
        target = Path(os.readlink(python))
        if target.is_absolute():
            python.unlink()
            python.symlink_to(os.path.relpath(target, PREFIX / "bin"))
    site = venv / "lib" / f"python{pyver}" / "site-packages"
    for pattern in UNUSED_PACKAGES:
        for path in site.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    for cache in [*venv.rglob("__pycache__")]:
        shutil.rmtree(cache)
    for direct_url in site.glob("*.dist-info/direct_url.json"):
        direct_url.unlink()  # names the build machine's wheel path; not needed to run
    for record in site.glob("*.dist-info/RECORD"):
        record.unlink()  # lists what we removed; nothing installs into or uninstalls this venv
    for installer in site.glob("*.dist-info/INSTALLER"):
        installer.unlink()
    cfg = venv / "pyvenv.cfg"
    # pyvenv.cfg names the venv by its path (and the command that made it): make it the
    # installed one.
    cfg.write_text(
        "".join(
            line
            for line in cfg.read_text().replace(str(venv), str(PREFIX)).splitlines(keepends=True)
            if not line.startswith("command")
        )
    )


def shared_objects(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.so*") if p.is_file() and not p.is_symlink())


def strip(objects: list[Path]) -> None:
    """Debug symbols off, as dh_strip does (lintian: unstripped-binary-or-object)."""
    for obj in objects:
        run(
            "strip",
            "--strip-unneeded",
            "--remove-section=.comment",
            "--remove-section=.note",
            obj,
        )


def shlib_depends(objects: list[Path], work: Path) -> list[str]:
    """What the compiled extensions link against, as Debian package relations."""
    if not objects:
        return []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        debian = Path(tmp) / "debian"
        debian.mkdir()
        # dpkg-shlibdeps reads the package's own stanza; nothing more is needed of it.
        (debian / "control").write_text(
            "Source: tablectl\n\nPackage: tablectl\nArchitecture: any\n"
        )
        # Wheels vendor the libraries their extensions need (pillow.libs, psycopg_binary.libs,
        # found through $ORIGIN): -l shows dpkg-shlibdeps where they are; they belong to no
        # Debian package, so they carry no dependency information of their own, and what
        # they need is found from them in turn (they are among the objects).
        vendored = sorted(
            {f"-l{obj.parent}" for obj in objects if obj.parent.name.endswith(".libs")}
        )
        out = output(
            "dpkg-shlibdeps",
            "-O",
            "--ignore-missing-info",
            *vendored,
            "-e",
            *objects,
            cwd=Path(tmp),
        )
    for line in out.splitlines():
        if line.startswith("shlibs:Depends="):
            return [dep.strip() for dep in line.split("=", 1)[1].split(",") if dep.strip()]
    return []


def _gzip(data: bytes) -> bytes:
    """gzip -9n: no name, no time stamp, so the package is the same whenever it is built."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def changelog_date() -> datetime.date:
    """The date of the newest entry of the Debian changelog (the man page's date)."""
    text = (REPO / "packaging/deb/changelog").read_text()
    trailer = next(line for line in text.splitlines() if line.startswith(" -- "))
    return email.utils.parsedate_to_datetime(trailer.split(">", 1)[1].strip()).date()


def install_data(stage: Path, meta: dict[str, str]) -> None:
    def write(dest: str, data: bytes, mode: int = 0o644) -> None:
        target = stage / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)

    def put(src: Path, dest: str, mode: int = 0o644) -> None:
        write(dest, src.read_bytes(), mode)

    put(REPO / "systemd/tablectl.service", "/usr/lib/systemd/system/tablectl.service")
    put(REPO / "systemd/tablectl.sysusers", "/usr/lib/sysusers.d/tablectl.conf")
    put(REPO / "systemd/tablectl.tmpfiles", "/usr/lib/tmpfiles.d/tablectl.conf")
    for rules in sorted((REPO / "systemd").glob("*.rules")):
        put(rules, f"/usr/lib/udev/rules.d/{rules.name}")
    # Documentation a person can read without any group: README, docs/, the examples.
    put(REPO / "README.md", f"{DOC}/README.md")
    put(REPO / "CHANGELOG.md", f"{DOC}/CHANGELOG.md")
    for src in sorted((REPO / "docs").rglob("*")):
        if src.is_file():
            put(src, f"{DOC}/{src.relative_to(REPO)}")
    for src in sorted((REPO / "config").rglob("*")):
        if src.is_file():
            put(src, f"{DOC}/examples/{src.relative_to(REPO / 'config')}")
    write(f"{DOC}/changelog.gz", _gzip((REPO / "packaging/deb/changelog").read_bytes()))
    write(
        f"{DOC}/copyright",
        b"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        b"Upstream-Name: tablectl\n\n"
        b"Files: *\nCopyright: 2026 the tablectl authors\nLicense: Apache-2.0\n\n"
        b"License: Apache-2.0\n"
        b" On Debian systems, the full text of the Apache License 2.0 is in\n"
        b" /usr/share/common-licenses/Apache-2.0.\n",
    )
    write(
        "/usr/share/lintian/overrides/tablectl",
        (REPO / "packaging/deb/lintian-overrides").read_bytes(),
    )
    # The man page and completion come from the same argparse definitions as `tablectl -h`.
    write(
        "/usr/share/man/man1/tablectl.1.gz",
        _gzip(cli_docs.manpage(meta["version"], date=changelog_date()).encode()),
    )
    write("/usr/share/bash-completion/completions/tablectl", cli_docs.completion("bash").encode())
    write("/usr/share/zsh/vendor-completions/_tablectl", cli_docs.completion("zsh").encode())
    # /usr/bin/tablectl runs the program in its venv (-I: no user site, no PYTHON* variables,
    # not the current directory on sys.path: a daemon and a root tool import only their own).
    write(
        "/usr/bin/tablectl",
        (
            "#!/bin/sh\n"
            f"# tablectl runs on Debian's Python in its own virtual environment ({PREFIX}).\n"
            f'exec {PREFIX}/bin/python3 -I -m tablectl "$@"\n'
        ).encode(),
        0o755,
    )


def control_files(stage: Path, meta: dict[str, str], arch: str, depends: list[str]) -> None:
    debian = stage / "DEBIAN"
    debian.mkdir()
    size_kb = (
        sum(p.lstat().st_size for p in stage.rglob("*") if p.is_file() and not p.is_symlink())
        // 1024
    )
    (debian / "control").write_text(
        f"Package: {meta['name']}\n"
        f"Version: {meta['version']}\n"
        f"Architecture: {arch}\n"
        f"Maintainer: {MAINTAINER}\n"
        f"Installed-Size: {size_kb}\n"
        f"Depends: {', '.join(depends)}\n"
        "Section: misc\n"
        "Priority: optional\n"
        "Homepage: https://example.invalid/tablectl\n"
        f"Description: {SYNOPSIS}\n"
        " tablectl runs a Three Card Poker, Ultimate Texas Hold 'Em or Let It Ride table:\n"
        " the card shuffler and the dealing shoe (serial or USB), the seat wagering\n"
        " sensors, acknowledge lamps and lock-out button (GPIO), progressive meters kept\n"
        " in a SQLite journal, and an MQTT relay to the progressive-system backend.\n"
    )
    conffiles = sorted(
        "/" + str(p.relative_to(stage)) for p in stage.glob("etc/**/*") if p.is_file()
    )
    if conffiles:
        (debian / "conffiles").write_text("".join(f"{c}\n" for c in conffiles))
    sums = []
    for path in sorted(stage.rglob("*")):
        if path.is_file() and not path.is_symlink() and debian not in path.parents:
            digest = hashlib.md5(path.read_bytes()).hexdigest()  # noqa: S324 - dpkg's format
            sums.append(f"{digest}  {path.relative_to(stage)}\n")
    (debian / "md5sums").write_text("".join(sums))
    for script in SCRIPTS:
        dest = debian / script
        shutil.copyfile(REPO / "packaging/deb" / script, dest)
        dest.chmod(0o755)


def depends(pyver: str, shlibs: list[str]) -> list[str]:
    major, minor = (int(x) for x in pyver.split("."))
    # The venv runs on this Python and holds compiled extensions (pydantic-core) for it.
    python = [f"python3 (>= {major}.{minor})", f"python3 (<< {major}.{minor + 1})"]
    return [*python, *shlibs, *RUNTIME_LIBRARIES, *SYSTEM_DEPENDS]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--out", type=Path, default=REPO / "dist", help="where the .deb goes")
    p.add_argument(
        "--python",
        type=Path,
        default=Path("/usr/bin/python3"),
        help="the Python the table PC runs (Debian's; needs python3-venv)",
    )
    p.add_argument("--work", type=Path, default=REPO / "build" / "deb", help="scratch space")
    args = p.parse_args(argv)
    if not args.python.exists():
        print(f"build_deb: {args.python} not found (apt-get install python3-venv)", file=sys.stderr)
        return 2
    for tool, package in (("dpkg-deb", "dpkg"), ("dpkg-shlibdeps", "dpkg-dev"), ("strip", "")):
        if shutil.which(tool) is None:
            print(
                f"build_deb: {tool} not found (apt-get install {package or 'binutils'})",
                file=sys.stderr,
            )
            return 2
    meta = metadata()
    arch = output("dpkg", "--print-architecture").strip()
    stage = args.work / "root"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    os.umask(0o022)
    progress = Progress(7)
    progress("the tablectl wheel")
    builder = Path(sys.executable)
    wheel = build_wheel(builder, args.work / "wheel")
    progress(f"a virtual environment on {args.python}")
    venv = create_venv(stage, args.python)
    progress("tablectl and its dependencies from PyPI (the slow step)")
    pyver = install_into(venv, builder, wheel)
    progress("pruning the venv and stripping compiled extensions")
    prune_venv(venv, pyver)
    objects = shared_objects(venv)
    strip(objects)
    progress("the dependencies on system libraries (dpkg-shlibdeps)")
    shlibs = shlib_depends(objects, args.work)
    progress("the unit, udev rules, docs, man page and completion")
    install_data(stage, meta)
    control_files(stage, meta, arch, depends(pyver, shlibs))
    progress("the package (dpkg-deb)")
    args.out.mkdir(parents=True, exist_ok=True)
    deb = args.out / f"{meta['name']}_{meta['version']}_{arch}.deb"
    run(
        "dpkg-deb", "--root-owner-group", "-Zgzip", "--build", stage, deb, stdout=subprocess.DEVNULL
    )
    progress.finish(deb)
    print(deb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
