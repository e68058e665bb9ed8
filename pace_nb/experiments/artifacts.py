"""Figure data: the computed frames and arrays the notebooks plot, kept beside the result rows.

A notebook's expensive inputs (training curves, Δ spectra, sketches, α paths, UMAP
coordinates, its own result rows) are stored in a results store under
``artifacts/<notebook>/<name>-<key>.{csv,npz}`` with a JSON manifest beside each (sha256, the
parameters that determine it). ``pace-nb figures`` then replots from them without training.
DataFrames are CSV; dicts of arrays are NPZ read with ``allow_pickle=False``: a cache never
executes code. The key hashes the notebook, the name, :data:`ARTIFACT_VERSION` and the
parameters (dataset, clients, seeds, rank, … — not the device). An entry whose checksum or
format fails is derived data: it is recomputed with a warning.

Reading order (:func:`reading_stores`): the store given (or ``$PACE_NB_RESULTS``, else the
user's ``data/results``) first, then the shipped ``results/``. New entries go to the first;
the shipped store is written only when it is given explicitly.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from pace_nb.core.io import atomic_write_bytes, atomic_write_json, read_regular_bytes
from pace_nb.experiments.store import stable_key

#: Bumped when a computation behind an artifact changes, so old entries are not read.
ARTIFACT_VERSION = 1
#: Set to "1" (``pace-nb figures --recompute``): :func:`cached` computes and stores, never reads.
RECOMPUTE_ENV = "PACE_NB_RECOMPUTE"


def _frame_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def _arrays_bytes(arrays: Mapping[str, Any]) -> bytes:
    buf = io.BytesIO()
    named: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}  # Any: savez's keywords include allow_pickle
    np.savez(buf, **named)
    return buf.getvalue()


class ArtifactStore:
    """The ``artifacts/`` folder of one results store (``root``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.folder = self.root / "artifacts"

    def __repr__(self) -> str:
        return f"ArtifactStore({str(self.root)!r})"

    @staticmethod
    def key(notebook: str, name: str, params: Mapping[str, Any]) -> str:
        return stable_key({"notebook": notebook, "name": name, "version": ARTIFACT_VERSION, "params": dict(params)})

    def _paths(self, notebook: str, name: str, key: str) -> tuple[Path, Path, Path]:
        base = self.folder / notebook / f"{name}-{key}"
        return base.with_suffix(".json"), base.with_suffix(".csv"), base.with_suffix(".npz")

    def entries(self) -> pd.DataFrame:
        """One row per stored entry (its manifest): ``notebook, name, key, format, bytes, params``."""
        cols = ["notebook", "name", "key", "format", "bytes", "params"]
        recs = []
        for meta_path in sorted(self.folder.glob("*/*.json")) if self.folder.is_dir() else []:
            try:
                meta = json.loads(read_regular_bytes(meta_path).decode("utf-8"))
                recs.append({c: meta[c] for c in cols[:-1]} | {"params": json.dumps(meta["params"], sort_keys=True)})
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged entry is recomputed on use (get)
        return pd.DataFrame(recs, columns=cols).sort_values(["notebook", "name", "key"]).reset_index(drop=True)

    def get(self, notebook: str, name: str, params: Mapping[str, Any]):
        """The stored value (DataFrame or ``{name: ndarray}``) or None; a damaged entry warns and gives None."""
        meta_path, csv_path, npz_path = self._paths(notebook, name, self.key(notebook, name, params))
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(read_regular_bytes(meta_path).decode("utf-8"))
            path = csv_path if meta["format"] == "csv" else npz_path
            data = read_regular_bytes(path)
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch")
            if meta["format"] == "csv":
                return pd.read_csv(io.BytesIO(data), keep_default_na=True)
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError, pd.errors.ParserError) as exc:
            warnings.warn(f"figure data {meta_path.with_suffix('')} is damaged ({exc}); recomputing it", RuntimeWarning,
                          stacklevel=2)
            return None

    def put(self, notebook: str, name: str, params: Mapping[str, Any], value) -> None:
        """Store ``value`` (a DataFrame or a mapping of arrays) atomically: data first, manifest last."""
        key = self.key(notebook, name, params)
        meta_path, csv_path, npz_path = self._paths(notebook, name, key)
        if isinstance(value, pd.DataFrame):
            fmt, path, data = "csv", csv_path, _frame_bytes(value)
        elif isinstance(value, Mapping):
            fmt, path, data = "npz", npz_path, _arrays_bytes(value)
        else:
            raise TypeError(f"figure data {name!r} must be a DataFrame or a mapping of arrays, not {type(value).__name__}")
        atomic_write_bytes(path, data)
        atomic_write_json(meta_path, {"notebook": notebook, "name": name, "key": key, "version": ARTIFACT_VERSION,
                                      "format": fmt, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                                      "params": dict(params)}, indent=1, sort_keys=True, default=str)


def reading_stores(results_dir: str | Path | None = None) -> list[ArtifactStore]:
    """Where figure data is looked up, in order; the first is where new entries are written."""
    from pace_nb.core.config import shipped_results_dir, user_results_dir

    first = user_results_dir(results_dir)
    stores = [ArtifactStore(first)]
    shipped = shipped_results_dir()
    if shipped is not None and shipped.resolve() != first.resolve():
        stores.append(ArtifactStore(shipped))
    return stores


def cached(notebook: str, name: str, params: Mapping[str, Any], compute: Callable[[], Any],
           results_dir: str | Path | None = None, *, recompute: bool = False):
    """``compute()``'s value, read from the first store of :func:`reading_stores` that holds it
    (unless ``recompute`` or ``$PACE_NB_RECOMPUTE=1``), else computed and written to the first store."""
    params = json.loads(json.dumps(dict(params), sort_keys=True, default=str))  # canonical JSON types
    stores = reading_stores(results_dir)
    if not (recompute or os.environ.get(RECOMPUTE_ENV) == "1"):
        for store in stores:
            value = store.get(notebook, name, params)
            if value is not None:
                return value
    value = compute()
    try:
        stores[0].put(notebook, name, params, value)
    except OSError as exc:  # an unwritable store costs the cache, not the figure
        warnings.warn(f"figure data {name!r} not stored in {stores[0].folder} ({exc})", RuntimeWarning, stacklevel=2)
        return value
    if isinstance(value, pd.DataFrame):  # what a later read returns (CSV types), so both runs plot the same
        return pd.read_csv(io.BytesIO(_frame_bytes(value)))
    return {k: np.asarray(v) for k, v in value.items()}
