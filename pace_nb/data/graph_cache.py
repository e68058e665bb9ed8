"""Safe on-disk cache of loaded graphs: NPZ arrays + a JSON manifest, keyed by the raw files.

PyG's own ``processed/*.pt`` files are read with ``torch.load(weights_only=False)``, so a file
planted in a writable cache would run code. pace_nb therefore never lets PyG read a processed
file it did not just write: PyG builds from the raw files inside a fresh private temporary
folder that is deleted afterwards (:func:`private_build_dir`), and the result is kept here as

    cache_dir()/graphs/<Name>_<key>.npz    x, edge_index, y (``np.load(allow_pickle=False)``)
    cache_dir()/graphs/<Name>_<key>.json   raw-file sha256s, array sha256, num_classes, version

where ``key`` hashes the raw files' sha256s: a repaired or replaced raw file gives another key,
so a stale graph is never served. A cache entry whose arrays fail their checksum is rebuilt.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np

from pace_nb.core.config import cache_dir, check_writable
from pace_nb.core.io import atomic_write_json, atomic_write_npz

CACHE_VERSION = 1
ARRAYS = ("x", "edge_index", "y")


def safe_name(name: str) -> str:
    """``name`` reduced to ``[A-Za-z0-9._-]`` without leading dots: safe as one path component."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).lstrip(".")
    return out[:64] or "graph"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def raw_checksums(raw_dir: Path, files) -> dict[str, str]:
    """sha256 of every raw file (the cache key's input)."""
    return {f: file_sha256(Path(raw_dir) / f) for f in files}


def array_checksum(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _paths(name: str, raw: dict[str, str]) -> tuple[Path, Path]:
    key = hashlib.sha256(json.dumps({"name": name, "raw": raw, "v": CACHE_VERSION},
                                    sort_keys=True).encode()).hexdigest()[:16]
    d = cache_dir() / "graphs"
    stem = f"{safe_name(name)}_{key}"
    return d / f"{stem}.npz", d / f"{stem}.json"


def load(name: str, raw: dict[str, str], optional: tuple[str, ...] = ()) -> tuple[dict[str, np.ndarray], int] | None:
    """(arrays, num_classes) of a verified cache entry, else None (a bad entry warns); arrays
    named in ``optional`` are read too when the entry holds them."""
    npz, meta = _paths(name, raw)
    if not npz.exists() or not meta.exists():
        return None
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        if info.get("version") != CACHE_VERSION or info.get("raw") != raw or info.get("dataset") != name:
            raise ValueError("its manifest does not match the raw files")
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ARRAYS + tuple(k for k in optional if k in z.files)}
        if array_checksum(arrays) != info.get("sha256"):
            raise ValueError("checksum mismatch")
        num_classes = int(info["num_classes"])
    except Exception as exc:  # noqa: BLE001 - any defect means: rebuild from the raw files
        warnings.warn(f"graph cache {npz.name} is corrupted or mismatched ({exc}); rebuilding it",
                      RuntimeWarning, stacklevel=3)
        return None
    return arrays, num_classes


def shape(name: str, raw: dict[str, str]) -> tuple[int, int] | None:
    """(features, classes) from a cache entry's manifest, without reading its arrays; None if absent."""
    meta = _paths(name, raw)[1]
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        return int(info["shapes"]["x"][1]), int(info["num_classes"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def save(name: str, raw: dict[str, str], arrays: dict[str, np.ndarray], num_classes: int) -> None:
    npz, meta = _paths(name, raw)
    npz.parent.mkdir(parents=True, exist_ok=True)
    check_writable(npz.parent, "cache folder", "; point $PACE_NB_CACHE at a writable folder")
    atomic_write_npz(npz, **arrays)
    atomic_write_json(meta, {"version": CACHE_VERSION, "dataset": name, "raw": raw, "sha256": array_checksum(arrays),
                             "num_classes": int(num_classes), "shapes": {k: list(v.shape) for k, v in arrays.items()}})


@contextlib.contextmanager
def private_build_dir() -> Iterator[Path]:
    """A fresh folder only this process can write (``mkdtemp``, mode 0700), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="pace_nb-build-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
