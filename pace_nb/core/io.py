"""Atomic, pickle-free file writes (JSON, CSV, NPZ)."""
from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import socket
import tempfile
import time
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


#: Temporary files of :func:`_atomic`: ``.<name>.<host>-<pid>-<random>.tmp`` beside the target.
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[a-z0-9_]+\.tmp$")
#: The naming before the writer was recorded (``.<name>.<random>.tmp``).
_OLD_TMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
#: Seconds after which a temporary file whose writer cannot be checked (another host, the old
#: naming) counts as abandoned.
STALE_SECONDS = 24 * 3600.0


@functools.cache
def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or not a pid we can judge): leave its file alone
    return True


def stale_temp_files(folder: str | os.PathLike, now: float | None = None) -> list[Path]:
    """The temporary files :func:`_atomic` left in ``folder`` when its process was killed between
    creating and renaming them (SIGKILL, power loss): those written on this host by a process that
    no longer runs, and those of another host or of the old naming untouched for :data:`STALE_SECONDS`."""
    now = time.time() if now is None else now
    out = []
    try:
        entries = [e for e in os.scandir(os.fspath(folder)) if e.name.startswith(".") and e.name.endswith(".tmp")]
    except OSError:
        return []
    for entry in entries:
        m = _TMP.match(entry.name)
        try:
            if m and m["host"] == _host():
                gone = not _running(int(m["pid"]))
            elif m or _OLD_TMP.match(entry.name):
                gone = now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            else:
                continue
        except OSError:
            continue
        if gone and entry.is_file(follow_symlinks=False):
            out.append(Path(entry.path))
    return out


def _atomic(path: str | os.PathLike, write) -> Path:
    """Write ``path`` through a temporary file in its folder, then rename. The file gets the mode
    ``open()`` would give it (``0o666`` less the umask), not ``mkstemp``'s private 0600, so a store
    shared through group or world read permissions stays readable to its other users.

    The temporary file's name records this host and process, so the next write into the folder
    removes what a killed writer left (:func:`stale_temp_files`). A write that fails (disk full,
    quota, read-only disk) leaves ``path`` as it was and is a one-line :class:`StorageError`."""
    from pace_nb.core.errors import PaceNBError

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in stale_temp_files(path.parent):
        with contextlib.suppress(OSError):
            old.unlink()
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_host()}-{os.getpid()}-", suffix=".tmp")
    except OSError as exc:
        raise _storage_error(path, exc) from exc
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, PaceNBError):
            raise _storage_error(path, exc) from exc
        raise
    return path


def _storage_error(path: Path, exc: OSError):
    from pace_nb.core.errors import StorageError

    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return StorageError(f"cannot write {path}: {exc.strerror or exc}; nothing was replaced"
                        + ("; free some space and rerun (finished work is kept)" if full else ""))


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
