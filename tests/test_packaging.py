"""drivers/ and simulators/ install only as tablectl.drivers / tablectl.simulators."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import tablectl.drivers
import tablectl.simulators

from .conftest import REPO

ROOTS = {"tablectl": "tablectl", "drivers": "tablectl.drivers", "simulators": "tablectl.simulators"}


def test_every_package_directory_is_listed() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for folder, package in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *rel)))
    assert found == listed
    assert setuptools["package-dir"] == {p: f for f, p in ROOTS.items()}


def test_subpackages_come_from_the_top_level_folders() -> None:
    assert Path(tablectl.drivers.__file__).resolve().parent == REPO / "drivers"
    assert Path(tablectl.simulators.__file__).resolve().parent == REPO / "simulators"


def test_no_generic_top_level_names_are_importable(tmp_path: Path) -> None:
    for name in ("drivers", "simulators"):
        proc = subprocess.run(
            [sys.executable, "-P", "-c", f"import {name}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, name


def test_the_licence_file_matches_the_package_metadata() -> None:
    import importlib.metadata

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert importlib.metadata.metadata("tablectl")["License-Expression"] == "Apache-2.0"
