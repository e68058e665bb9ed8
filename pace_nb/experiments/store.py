"""Results store: one checksummed CSV per finished grid cell, tidy typed DataFrames out.

Layout under the store directory (writes: ``--results DIR`` > ``$PACE_NB_RESULTS`` >
``<repo>/data/results``; reads fall back to the shipped, read-only ``<repo>/results`` when the
user's store holds no cells, see :meth:`ResultsStore.for_reading`)::

    cells/<key>.csv    the cell's result rows (ARCHITECTURE "Result rows"), written atomically
    cells/<key>.json   its manifest entry, written atomically AFTER the CSV: sha256 of the
                       CSV bytes, row count, the cell's parameters, time stamp

    cells/.<key>.lock  the cell's file lock (``filelock``): writers hold it across both writes

The JSON is the commit marker: a cell counts as present only when both exist and the CSV
matches its checksum. A CSV without its JSON (a kill between the two writes) is an
unfinished cell and is simply recomputed; a checksum/row-count mismatch or an unreadable
file raises :class:`~pace_nb.core.errors.DataCorruptionError` naming the file, never a silent
merge. A reader that sees a mismatch while another process holds the cell's lock waits for
the writer and reads again (:class:`~pace_nb.core.errors.BusyError` if it does not finish).
Re-appending a cell replaces it, so rerunning never duplicates rows. Two cells holding the
same row (identity columns + ``params``) with different values are a conflict, an error
naming both cells; identical copies (e.g. Local, trained in every method group) are kept once.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from pace_nb.core import config
from pace_nb.core.errors import BusyError, ConfigError, DataCorruptionError
from pace_nb.core.io import NotRegularFileError, atomic_write_bytes, atomic_write_json, read_regular_bytes

from pace_nb.experiments.migration import DERIVED, migrate
from pace_nb.core.schema import (COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, KEY_COLUMNS, REQUIRED,  # noqa: F401
                                    SETTING, STR_COLUMNS)


#: Columns whose values must agree between two copies of one row (``seconds`` is wall time).
VALUE_COLUMNS: tuple[str, ...] = tuple(c for c in FLOAT_COLUMNS if c != "seconds") + ("n_test",)
#: Seconds a writer waits for a cell's lock, and a reader for a writer to finish.
LOCK_TIMEOUT = 600.0
READ_WAIT = 60.0


def stable_key(obj: Any, length: int = 16) -> str:
    """Stable hex key of a JSON-able object (sorted keys, no whitespace)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def normalize_rows(rows: pd.DataFrame | Iterable[Mapping]) -> pd.DataFrame:
    """Typed copy of result rows: schema columns first (missing → NaN), extra columns kept.

    The one migration of older rows (:func:`~pace_nb.experiments.migration.migrate`): a row lacking
    a dimension column (the column absent, or its value NaN; "" for ``study`` / ``evaluation``) gets it
    from ``params`` and ``seed``:

    * ``study``: "comparison" when ``params.evaluation`` starts with "complete_graph"; "spear" for
      method spear or params holding SPEAR's T, a, gamma; else "pace";
    * ``evaluation``: "receivers" for study "pace", else "complete_graph";
    * ``beta``: the number ``beta`` in params (top level or nested, e.g. ``data.beta``), else NaN;
    * ``scope``: ``params.scope``, else "";
    * ``data_seed``: ``params.data.seed``, else ``seed`` outside study "pace" (there it is the
      data seed) unless it equals ``params.run_seed`` (a one-shot row run on its own), else -1;
    * ``run_seed``: ``params.run_seed``, else ``seed`` in study "pace", the first paper seed for the
      efficiency's FedAvg row (study "spear", another method), else -1 (SPEAR is training-free).

    These are the values the row builders set, so an old row and its rerun compare equal.
    """
    frame = pd.DataFrame(rows).copy() if not isinstance(rows, pd.DataFrame) else rows.copy()
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"result rows lack required column(s) {', '.join(missing)}; "
                          f"build rows with pace_nb.methods.evaluation.make_row")
    for col in COLUMNS:
        if col not in frame.columns and col not in DERIVED:
            frame[col] = "" if col in STR_COLUMNS else np.nan
    for col in INT_COLUMNS:
        if col in DERIVED:
            continue
        try:
            frame[col] = pd.to_numeric(frame[col], errors="raise").astype("int64")
        except (ValueError, TypeError):
            raise ConfigError(f"result column {col!r} must hold integers (no missing values)") from None
    frame["params"] = frame["params"].fillna("").astype(str)
    frame = migrate(frame)
    for col in DERIVED:
        if col in INT_COLUMNS:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(-1).astype("int64")
    for col in FLOAT_COLUMNS:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    frame["n_test"] = pd.to_numeric(frame["n_test"], errors="coerce").astype("Int64")
    for col in STR_COLUMNS:
        frame[col] = frame[col].fillna("").astype(str)
    extra = [c for c in frame.columns if c not in COLUMNS]
    return frame[list(COLUMNS) + extra].reset_index(drop=True)


def filter_rows(frame: pd.DataFrame, filters: Mapping[str, Any]) -> pd.DataFrame:
    for col, want in filters.items():
        if want is None:
            continue
        if col not in frame.columns:
            raise ConfigError(f"cannot filter results by unknown column {col!r}; "
                              f"columns: {', '.join(frame.columns)}")
        if isinstance(want, (list, tuple, set, frozenset)):
            frame = frame[frame[col].isin(list(want))]
        else:
            frame = frame[frame[col] == want]
    return frame



def _read_store_file(path: Path, what: str, tail: str) -> bytes:
    """A store file's bytes; unreadable by this user or not a regular file is one clear error
    (``what``: "results manifest" / "results file"; ``tail`` ends the not-regular message)."""
    try:
        return read_regular_bytes(path)
    except PermissionError:
        raise ConfigError(f"{what} {path} cannot be read by this user (permission denied); the file is not "
                          f"damaged: ask the store's owner to make it readable (chmod a+r)") from None
    except NotRegularFileError:
        raise DataCorruptionError(f"{what} {path} is not a regular file (a FIFO, device or folder); "
                                  f"it was not opened{tail}") from None

class ResultsStore:
    """Append-only, resumable, corruption-detecting store of result rows (one file per cell)."""

    def __init__(self, path: str | os.PathLike | None = None, *, create: bool = True):
        self.root = config.results_dir(path, create=create)
        self.cells_dir = self.root / "cells"
        self.read_only = False

    @classmethod
    def for_reading(cls, path: str | os.PathLike | None = None, *, must_exist: bool = False) -> ResultsStore:
        """The store readers use (:func:`~pace_nb.core.config.read_results_dir`): ``path`` >
        ``$PACE_NB_RESULTS`` > the user's ``data/results`` when it holds cells > the shipped
        ``results/``, which is then read-only. A missing folder reads as empty unless ``must_exist``."""
        root, shipped = config.read_results_dir(path)
        if must_exist:
            config.results_dir(root, create=False)
        store = cls.__new__(cls)
        store.root, store.cells_dir, store.read_only = root, root / "cells", shipped
        return store

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.root)!r})"

    # -- writing -------------------------------------------------------------------------
    def append(self, rows: pd.DataFrame | Iterable[Mapping], cell_key: str | None = None,
               cell: Mapping[str, Any] | None = None, seconds: float | None = None,
               provenance: Mapping[str, Any] | None = None) -> str:
        """Store the rows of one finished cell atomically; returns its key.

        ``seconds``: the cell's wall time, kept in its manifest entry (reports of run time);
        ``provenance``: what computed it (:func:`~pace_nb.experiments.provenance.provenance`).

        Without ``cell_key`` the key is a hash of the rows' identity columns, so appending
        the same rows twice replaces them instead of duplicating them.
        """
        if self.read_only:
            raise ConfigError(f"the shipped results store {self.root} is read-only; write to your own store "
                              f"(pass --results DIR, set $PACE_NB_RESULTS, or use the default data/results)")
        frame = normalize_rows(rows)
        if cell_key is None:
            ident = frame[list(KEY_COLUMNS)].astype(str).agg("|".join, axis=1)
            cell_key = "rows-" + stable_key(sorted(set(ident)))
        if not cell_key or any(ch in cell_key for ch in "/\\") or cell_key.startswith("."):
            raise ConfigError(f"invalid cell key {cell_key!r}")
        data = frame.to_csv(index=False).encode("utf-8")
        csv_path, meta_path = self._paths(cell_key)
        config.ensure_dir(self.cells_dir, "results folder")
        config.check_writable(self.cells_dir, "results folder", "; pass --results DIR or set $PACE_NB_RESULTS")
        with self._lock(cell_key, LOCK_TIMEOUT):
            atomic_write_bytes(csv_path, data)
            atomic_write_json(meta_path, {
                "key": cell_key, "file": csv_path.name, "sha256": hashlib.sha256(data).hexdigest(),
                "rows": int(len(frame)), "cell": dict(cell) if cell else None,
                **({"seconds": round(float(seconds), 1)} if seconds is not None else {}),
                **({"provenance": dict(provenance)} if provenance is not None else {}),
                "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        return cell_key

    def _lock(self, key: str, timeout: float):
        from filelock import FileLock

        return FileLock(str(self.cells_dir / f".{key}.lock"), timeout=timeout)

    def claim(self, key: str):
        """Take the work claim of cell ``key`` (a lock held while one process computes it; the OS
        drops it when that process dies), or None when another process holds it. Release it with
        ``.release()`` once the cell is stored."""
        from filelock import FileLock, Timeout

        config.ensure_dir(self.cells_dir, "results folder")
        lock = FileLock(str(self.cells_dir / f".{key}.run.lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            return None
        return lock

    def discard(self, cell_key: str) -> None:
        """Remove one cell (e.g. after a corruption report) so that a rerun recomputes it."""
        if self.read_only:
            raise ConfigError(f"the shipped results store {self.root} is read-only; nothing discarded")
        with self._lock(cell_key, LOCK_TIMEOUT):
            for p in self._paths(cell_key)[::-1]:
                p.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------------
    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.cells_dir / f"{key}.csv", self.cells_dir / f"{key}.json"

    def keys(self) -> list[str]:
        """Keys of the committed cells (those with a manifest entry), sorted."""
        if not self.cells_dir.exists():
            return []
        if not self.cells_dir.is_dir():
            raise ConfigError(f"results store {self.root}: {self.cells_dir} is a file, not the folder of cells; "
                              f"give the folder of a results store")
        return sorted(p.stem for p in self.cells_dir.glob("*.json") if not p.name.startswith("."))

    def identity(self) -> str:
        """The store's identity: a hash of its committed cells' keys and CSV checksums (16 hex). Two
        stores holding the same cells have the same identity; adding, removing or recomputing a
        cell changes it (a report names the store it was generated from by it)."""
        return stable_key(sorted((k, str(self._manifest(k)["sha256"])) for k in self.keys()))

    def _manifest(self, key: str) -> dict:
        meta_path = self._paths(key)[1]
        try:
            meta = json.loads(_read_store_file(meta_path, "results manifest", " — remove it from the store").decode("utf-8"))
            if not isinstance(meta, dict) or not {"sha256", "rows"} <= meta.keys():
                raise ValueError("missing sha256/rows")
        except (ConfigError, DataCorruptionError):
            raise
        except (ValueError, OSError) as exc:
            raise DataCorruptionError(f"results manifest {meta_path} is unreadable ({exc}); delete it "
                                      f"(and {meta_path.with_suffix('.csv').name}) to recompute that cell") from None
        return meta

    def manifest(self, key: str) -> dict:
        """The manifest entry of committed cell ``key`` (sha256, rows, the cell's parameters, ...)."""
        return self._manifest(key)

    def _read_cell(self, key: str) -> pd.DataFrame:
        """The cell's rows; on a mismatch, wait for a writer holding its lock and read again."""
        try:
            return self._read_cell_once(key)
        except DataCorruptionError as first:
            from filelock import Timeout

            try:
                lock = self._lock(key, READ_WAIT)
                lock.acquire()
            except Timeout:
                raise BusyError(f"results cell {key} is being written by another process "
                                f"(lock {self.cells_dir / f'.{key}.lock'} held for {READ_WAIT:g} s); "
                                f"retry when it finishes") from None
            except OSError:  # read-only store: nobody can be writing it
                raise first from None
            try:
                return self._read_cell_once(key)
            finally:
                lock.release()

    def _read_cell_once(self, key: str) -> pd.DataFrame:
        csv_path, meta_path = self._paths(key)
        meta = self._manifest(key)
        hint = f"; delete {csv_path} and {meta_path.name} (or ResultsStore.discard({key!r})) and rerun to recompute it"
        try:
            data = _read_store_file(csv_path, "results file", hint)
        except FileNotFoundError:
            raise DataCorruptionError(f"results file {csv_path} is missing but listed in its manifest{hint}") from None
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise DataCorruptionError(f"results file {csv_path} is corrupted or truncated (checksum mismatch){hint}")
        try:
            frame = pd.read_csv(io.BytesIO(data), dtype={c: str for c in STR_COLUMNS}, keep_default_na=False,
                                na_values={c: [""] for c in FLOAT_COLUMNS + ("n_test", "data_seed", "run_seed")})
        except (ValueError, pd.errors.ParserError) as exc:
            raise DataCorruptionError(f"results file {csv_path} is unreadable ({exc}){hint}") from None
        if len(frame) != meta["rows"]:
            raise DataCorruptionError(f"results file {csv_path} has {len(frame)} rows, manifest says {meta['rows']}{hint}")
        missing = [c for c in REQUIRED if c not in frame.columns]
        if missing:
            raise DataCorruptionError(f"results file {csv_path} lacks column(s) {', '.join(missing)}{hint}")
        try:
            return normalize_rows(frame)
        except ConfigError as exc:
            raise DataCorruptionError(f"results file {csv_path}: {exc}{hint}") from None

    def rows_of(self, cell_key: str) -> pd.DataFrame:
        """The rows of one committed cell (checksum-verified), as written."""
        return self._read_cell(cell_key)

    def has(self, cell_key: str) -> bool:
        """True when the cell is committed and intact (corruption raises, never 'absent')."""
        csv_path, meta_path = self._paths(cell_key)
        if not meta_path.exists():
            return False
        self._read_cell(cell_key)
        return True

    def cells(self) -> pd.DataFrame:
        """One row per committed cell: key, rows, written, wall seconds, the cell's parameters and
        its ``setting_key`` (the key without the data fingerprint: a config's cells match on it)."""
        recs = []
        for key in self.keys():
            meta = self._manifest(key)
            recs.append({"key": key, "rows": meta["rows"], "written": meta.get("written"),
                         "wall_seconds": meta.get("seconds"), "provenance": meta.get("provenance"),
                         **(meta.get("cell") or {}),
                         "setting_key": setting_key(key, meta.get("cell"))})
        return pd.DataFrame(recs)

    def load(self, dedupe: bool = True, **filters) -> pd.DataFrame:
        """All rows (typed, tidy), filtered by ``column=value`` or ``column=[values]``.

        Identical result rows written by two cells (e.g. Local, trained in every method
        group) are kept once (``dedupe``); rows that differ in ``params`` are both kept.
        """
        keys = self.keys()
        check_data_versions({k: self._manifest(k).get("cell") for k in keys})
        frames = [self._read_cell(k).assign(_cell=k) for k in keys]
        frame = normalize_rows(pd.concat(frames, ignore_index=True) if frames
                               else pd.DataFrame(columns=list(COLUMNS) + ["_cell"]))
        if dedupe:
            frame = collapse_duplicates(frame)
        frame = filter_rows(frame.drop(columns="_cell"), filters)
        return frame.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)

    def pooled(self, **filters) -> pd.DataFrame:
        """Pooled rows (``receiver == -1``): one per dataset × … × seed × method × variant × rank."""
        return self.load(receiver=-1, **filters)

    def receivers(self, **filters) -> pd.DataFrame:
        """Per-receiver rows (``receiver >= 0``) for harm diagnostics."""
        frame = self.load(**filters)
        return frame[frame["receiver"] >= 0].reset_index(drop=True)


#: Fields of a cell's description that are not part of its setting (what is computed on which data).
_NOT_SETTING = ("key", "label", "data")


def setting_key(key: str, cell: Mapping | None) -> str:
    """The key of a stored cell's setting: a cell with a data fingerprint is keyed by it too
    (:attr:`~pace_nb.experiments.cells.Cell.setting_key` of the same cell); one without is its key."""
    if not isinstance(cell, Mapping) or not cell.get("data"):
        return key
    return stable_key({k: v for k, v in cell.items() if k not in _NOT_SETTING})


def check_data_versions(cells: Mapping[str, Mapping | None]) -> None:
    """Raise :class:`DataCorruptionError` when two cells (key → the ``cell`` of its manifest) hold
    one setting computed on two versions of the raw data (``cell["data"]``, the data fingerprint).

    Cells written before fingerprints were recorded (no ``data``) are taken to be computed on the
    current raw files and never conflict."""
    seen: dict[str, tuple[str, str]] = {}
    for key, cell in cells.items():
        if not isinstance(cell, Mapping) or not cell.get("data"):
            continue
        setting = setting_key(key, cell)
        other = seen.setdefault(setting, (key, str(cell["data"])))
        if other[1] != str(cell["data"]):
            raise DataCorruptionError(
                f"mixed data versions: cells {other[0]} and {key} hold the same setting "
                f"({cell.get('label') or cell.get('dataset')}) computed on different raw data (fingerprints "
                f"{other[1]} and {cell['data']}); remove the cell of the old data (ResultsStore.discard(key)) before reading")


def collapse_duplicates(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep one copy of rows that agree on identity + ``params`` (column ``_cell``: their cell);
    copies whose :data:`VALUE_COLUMNS` differ raise :class:`DataCorruptionError` naming both cells."""
    ident = list(KEY_COLUMNS) + ["params"]
    dup = frame.duplicated(subset=ident, keep=False)
    if dup.any():
        for _, group in frame[dup].groupby(ident, sort=False, dropna=False):
            vals = group[list(VALUE_COLUMNS)].astype("float64").to_numpy()
            differs = ~((vals == vals[0]) | (np.isnan(vals) & np.isnan(vals[0])))
            bad = np.flatnonzero(differs.any(axis=1))
            if bad.size:
                first, other = group.iloc[0], group.iloc[bad[0]]
                cols = [c for c, d in zip(VALUE_COLUMNS, differs[bad[0]], strict=True) if d]
                what = ", ".join(f"{c}={first[c]}" for c in KEY_COLUMNS)
                raise DataCorruptionError(
                    f"conflicting results: cells {first['_cell']} and {other['_cell']} both hold the row "
                    f"({what}) with the same parameters but different {', '.join(cols)} "
                    f"({'; '.join(f'{first[c]} vs {other[c]}' for c in cols)}); remove the wrong cell "
                    f"(ResultsStore.discard(key)) before reading")
    return frame.drop_duplicates(subset=ident, keep="first")


# -- notebook helpers ----------------------------------------------------------------------


def load_results(path: str | os.PathLike | None = None, **filters) -> pd.DataFrame:
    """Rows of the results store at ``path`` filtered by column values; without ``path`` the
    reading order of :meth:`ResultsStore.for_reading` (the shipped store when the user has none)."""
    return ResultsStore.for_reading(path).load(**filters)
