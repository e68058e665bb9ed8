"""Packaging: a non-editable install (a wheel) carries every data file the package reads.

The full check — build a wheel, install it into a fresh venv, run ``pace-nb run`` and
``pace-nb tables`` from outside the checkout — is ``.ci/packaging``, run by ``.ci/run``.
"""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pace_nb"


def _data_files() -> set[str]:
    """Every file under pace_nb/ that is not Python source or a byte-code cache."""
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


def _package_data_globs() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["setuptools"]["package-data"]["pace_nb"]


def test_package_data_globs_cover_every_data_file():
    data = _data_files()
    assert any(f.endswith(".csv") for f in data)  # the papers' values are package data
    matched = {p.relative_to(ROOT).as_posix() for g in _package_data_globs() for p in PACKAGE.glob(g)}
    assert data - matched == set(), "package data not shipped by [tool.setuptools.package-data]"


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None,
                    reason="setuptools not installed")
def test_wheel_contains_every_data_file(tmp_path):
    src = tmp_path / "src"  # a clean copy: no stale egg-info can add files the config would not
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(PACKAGE, src / "pace_nb", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           str(src), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("pace_nb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert _data_files() - names == set()
    py = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}
    assert py - names == set()  # every subpackage is found by [tool.setuptools.packages.find]
    configs = {f"pace_nb/configs/{p.name}" for p in (ROOT / "configs").glob("*.toml")}
    assert configs and configs - names == set()  # the shipped grid configs: `pace-nb grid quick` from a wheel
