"""Build the Debian package a table PC installs: `make deb` (README.md, "Installing on a table PC").

The program goes into a virtual environment at /opt/tablectl/venv built on the target's own
Python (Debian 12: /usr/bin/python3, 3.11), with its dependencies from PyPI; /usr/bin/tablectl
points at it. Beside it: /etc/tablectl/examples/ (config/, with the Mosquitto ACL example when
present), the systemd unit, sysusers.d and tmpfiles.d entries, the udev rules (every
systemd/*.rules), the docs and the licence. Maintainer scripts are in packaging/deb/.

The venv is built in a staging directory and moved into place by rewriting the paths it
records (script shebangs, pyvenv.cfg) and compiling the bytecode for its final path, as
dh-virtualenv does.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PREFIX = Path("/opt/tablectl/venv")
MAINTAINER = "tablectl maintainers <tablectl@example.invalid>"
SCRIPTS = ("postinst", "prerm", "postrm")


def run(*argv: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in argv], check=True, **kwargs)  # type: ignore[call-overload]


def output(*argv: str | Path) -> str:
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True).stdout


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


def build_venv(stage: Path, python: Path, wheel: Path) -> str:
    """The venv at stage/opt/tablectl/venv; returns its Python's X.Y."""
    venv = stage / PREFIX.relative_to("/")
    run(python, "-m", "venv", venv)
    pip = venv / "bin" / "pip"
    run(pip, "install", "--quiet", "--no-compile", wheel)
    staged = str(venv)
    # Scripts and activate files name the venv by its path: make it the installed one.
    for path in (venv / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if staged.encode() in data:
            path.write_bytes(data.replace(staged.encode(), str(PREFIX).encode()))
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(staged, str(PREFIX)))
    for direct_url in venv.glob("lib/python*/site-packages/tablectl-*.dist-info/direct_url.json"):
        direct_url.unlink()  # names the build machine's wheel path; not needed to run
    version = output(
        venv / "bin" / "python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"
    )
    # Bytecode for the final path, so tracebacks and imports never mention the stage.
    run(
        venv / "bin" / "python",
        "-m",
        "compileall",
        "-q",
        "-j0",
        "-s",
        stage,
        "-p",
        "/",
        venv / "lib",
    )
    return version.strip()


def install_data(stage: Path) -> None:
    def put(src: Path, dest: str, mode: int = 0o644) -> None:
        target = stage / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        target.chmod(mode)

    examples = stage / "etc/tablectl/examples"
    for src in sorted((REPO / "config").rglob("*")):
        if src.is_file():
            put(src, f"/etc/tablectl/examples/{src.relative_to(REPO / 'config')}")
    assert examples.is_dir()
    put(REPO / "systemd/tablectl.service", "/usr/lib/systemd/system/tablectl.service")
    put(REPO / "systemd/tablectl.sysusers", "/usr/lib/sysusers.d/tablectl.conf")
    put(REPO / "systemd/tablectl.tmpfiles", "/usr/lib/tmpfiles.d/tablectl.conf")
    for rules in sorted((REPO / "systemd").glob("*.rules")):
        put(rules, f"/usr/lib/udev/rules.d/{rules.name}")
    doc = "/usr/share/doc/tablectl"
    put(REPO / "README.md", f"{doc}/README.md")
    put(REPO / "LICENSE", f"{doc}/LICENSE")
    for src in sorted((REPO / "docs").rglob("*.md")):
        put(src, f"{doc}/{src.relative_to(REPO)}")
    (stage / "usr/share/doc/tablectl/copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Upstream-Name: tablectl\n\n"
        "Files: *\nCopyright: the tablectl authors\nLicense: Apache-2.0\n"
        " On Debian systems, the full text of the Apache License 2.0 is in\n"
        " /usr/share/common-licenses/Apache-2.0 (and in LICENSE beside this file).\n"
    )
    bin_dir = stage / "usr/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "tablectl").symlink_to(PREFIX / "bin" / "tablectl")


def control_files(stage: Path, meta: dict[str, str], arch: str, pyver: str) -> None:
    debian = stage / "DEBIAN"
    debian.mkdir()
    size_kb = (
        sum(p.lstat().st_size for p in stage.rglob("*") if p.is_file() and not p.is_symlink())
        // 1024
    )
    major, minor = (int(x) for x in pyver.split("."))
    (debian / "control").write_text(
        f"Package: {meta['name']}\n"
        f"Version: {meta['version']}\n"
        f"Architecture: {arch}\n"
        f"Maintainer: {MAINTAINER}\n"
        f"Installed-Size: {size_kb}\n"
        # The venv runs on this Python and holds compiled extensions (pydantic-core) for it.
        f"Depends: python3 (>= {major}.{minor}), python3 (<< {major}.{minor + 1}), systemd, udev\n"
        "Recommends: mosquitto-clients\n"
        "Section: misc\n"
        "Priority: optional\n"
        "Homepage: https://example.invalid/tablectl\n"
        f"Description: {meta['description']}\n"
        " The controller daemon for casino table-game hardware: the card shuffler, the seat\n"
        " wagering sensors, acknowledge lamps and lock-out button, progressive meters kept in\n"
        " SQLite, and an MQTT relay to the progressive-system backend.\n"
    )
    conffiles = sorted(
        "/" + str(p.relative_to(stage)) for p in (stage / "etc").rglob("*") if p.is_file()
    )
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    meta = metadata()
    arch = output("dpkg", "--print-architecture").strip()
    stage = args.work / "root"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    os.umask(0o022)
    wheel = build_wheel(Path(sys.executable), args.work / "wheel")
    pyver = build_venv(stage, args.python, wheel)
    install_data(stage)
    control_files(stage, meta, arch, pyver)
    args.out.mkdir(parents=True, exist_ok=True)
    deb = args.out / f"{meta['name']}_{meta['version']}_{arch}.deb"
    run(
        "dpkg-deb", "--root-owner-group", "-Zgzip", "--build", stage, deb, stdout=subprocess.DEVNULL
    )
    print(deb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
