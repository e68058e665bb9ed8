"""Atomic, pickle-free file writes (JSON, CSV, NPZ)."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def current_umask() -> int:
    """The process's file-creation mask (read from ``/proc`` where possible: setting and restoring
    it, the portable way, races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic(path: str | os.PathLike, write) -> Path:
    """Write ``path`` through a temporary file in its folder, then rename. The file gets the mode
    ``open()`` would give it (``0o666`` less the umask), not ``mkstemp``'s private 0600, so a store
    shared through group or world read permissions stays readable to its other users."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
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
    return _atomic(path, lambda fh: np.savez(fh, **arrays))  # type: ignore[arg-type]  # numpy's stub: savez(file, *args, allow_pickle, **kwds)


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


# -- reading without blocking --------------------------------------------------------------
class NotRegularFileError(OSError):
    """A path that is a FIFO, socket, device or folder where a regular file was expected."""


def read_regular_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of REGULAR file ``path``. The file is opened non-blocking and checked with
    ``fstat`` on the open descriptor, so a FIFO or device planted under a file's name raises
    :class:`NotRegularFileError` instead of hanging the reader."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{path} is not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)
