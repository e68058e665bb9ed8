"""Checks of a grid's cells before any of them runs (dry runs too): the raw data's fingerprints,
the memory a cell's training needs, and which cells a store already holds (data versions)."""
from __future__ import annotations

import json
from collections.abc import Iterable

from pace_nb.core.errors import ConfigError, MissingDataError
from pace_nb.experiments.cells import Cell
from pace_nb.experiments.store import ResultsStore
from pace_nb.nn.training import TrainConfig


def fingerprints(datasets: Iterable[str], data_root) -> dict[str, str]:
    """Dataset → its raw data's fingerprint; "" when its raw files are missing (the cell is not run)."""
    from pace_nb.data.datasets import data_fingerprint

    out = {}
    for d in datasets:
        try:
            out[d] = data_fingerprint(d, data_root)
        except MissingDataError:
            out[d] = ""
    return out


def check_memory(cells: list[Cell], data_root, device) -> None:
    """Refuse, before any cell runs (dry runs too), a protocol cell whose batched Local training
    would not fit in memory (:func:`~pace_nb.core.limits.check_training_memory`); datasets whose
    shape is not known without loading them (not yet cached) are checked when their cell runs."""
    from pace_nb.core.config import resolve_device
    from pace_nb.core.limits import check_training_memory
    from pace_nb.data.datasets import dataset_shape

    shapes: dict[str, tuple[int, int] | None] = {}
    biggest: dict[tuple, Cell] = {}
    for cell in cells:
        if cell.kind == "protocol":
            hidden = int(json.loads(cell.options).get("train", {}).get("hidden", TrainConfig.hidden))
            models = len(cell.seeds) * cell.num_clients
            key = (cell.dataset, hidden)
            if key not in biggest or models > len(biggest[key].seeds) * biggest[key].num_clients:
                biggest[key] = cell
    dev = resolve_device(device)
    for (dataset, hidden), cell in biggest.items():
        if dataset not in shapes:
            shapes[dataset] = dataset_shape(dataset, data_root)
        shape = shapes[dataset]
        if shape is not None:
            features, classes = shape
            try:
                check_training_memory(len(cell.seeds) * cell.num_clients, features, hidden, classes, dev)
            except ConfigError as exc:
                raise ConfigError(f"cell {cell.label}: {exc}") from None


def legacy_done(store: ResultsStore, cell: Cell) -> bool:
    """A cell stored before data fingerprints were kept (under its setting key, no ``data`` in its
    manifest) counts as computed on the current raw files (docs/ARCHITECTURE.md, "Data versions")."""
    if not cell.data or not store.has(cell.setting_key):
        return False
    return not (store.manifest(cell.setting_key).get("cell") or {}).get("data")
