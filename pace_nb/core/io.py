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
