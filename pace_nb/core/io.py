"""Atomic, pickle-free file writes (JSON, CSV, NPZ)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def _atomic(path: str | os.PathLike, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_bytes(path, data: bytes) -> Path:
    return _atomic(path, lambda fh: fh.write(data))


def atomic_write_text(path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, obj: Any, **kw) -> Path:
    kw.setdefault("indent", 2)
    return atomic_write_text(path, json.dumps(obj, **kw) + "\n")


def atomic_write_npz(path, **arrays: np.ndarray) -> Path:
    return _atomic(path, lambda fh: np.savez(fh, **arrays))


def atomic_write_csv(path, frame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False))


# -- output targets, validated before any work ---------------------------------------------
def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def write_probe(folder: str | os.PathLike) -> None:
    """Create and remove a file in ``folder``; raises ``OSError`` when that is not possible
    (probed rather than judged from permission bits, so root and read-only mounts are alike)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".write-probe.")
    os.close(fd)
    os.unlink(tmp)


def _probe(folder: Path, what: str, target: Path) -> None:
    from pace_nb.core.errors import ConfigError

    base = _nearest_existing(folder)
    if not base.is_dir():
        raise ConfigError(f"{what} {target}: {base} is a file, not a folder")
    try:
        write_probe(base)
    except OSError as exc:
        raise ConfigError(f"{what} {target}: cannot write in {base} ({exc.strerror or exc})") from None


def check_output_file(path, what: str = "output file") -> Path:
    """An output FILE that can be written: not a folder, in an existing writable folder (no
    folder is created for a file).

    Commands call this before computing, so a bad ``--json`` target loses no work."""
    from pace_nb.core.errors import ConfigError

    path = Path(path)
    if str(path).endswith(("/", os.sep)) or path.is_dir():
        raise ConfigError(f"{what} {path} is a folder; give a file name (e.g. {path / 'out.json'})")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{what} {path} is not a regular file")
    parent = path.parent
    _probe(parent, what, path)
    if not parent.is_dir():
        raise ConfigError(f"{what} {path}: folder {parent} does not exist (create it first)")
    return path


def check_output_dir(path, what: str = "output folder") -> Path:
    """An output FOLDER that can be written: not a file, writable (or creatable)."""
    from pace_nb.core.errors import ConfigError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file, not a folder")
    _probe(path, what, path)
    return path
