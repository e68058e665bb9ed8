"""One file per data holder: a client's own subgraph, and nothing else (deployment inputs).

:func:`export_partitions` splits a :class:`~pace_nb.data.federation.FederatedGraph` into
``client_<k>.npz`` files (features, labels, local edges, masks, global ids of client k) and
``federation.json`` (public facts: dataset, K, C, F, the partition config, a sha256 of each
client file, and the batched trainer's layout — ``pad_to``, the largest client's node count —
so that one client alone trains bit for bit the W_L it gets in the K-client batch). A SuperNode is pointed at ONE file (``partition-dir`` + ``partition-id``) and
:func:`load_partition` reads only that file — no data root, no raw dataset, no other client.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pace_nb.core.errors import ConfigError, DataCorruptionError, MissingDataError
from pace_nb.core.io import atomic_write_json, atomic_write_npz
from pace_nb.data.federation import ClientGraph

META = "federation.json"
FORMAT = 1
_ARRAYS = ("global_ids", "edge_index", "x", "y", "train_mask", "val_mask", "test_mask")


def client_file(directory, k: int) -> Path:
    return Path(directory) / f"client_{int(k)}.npz"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_partitions(fg, directory) -> Path:
    """Write every client's own data to ``directory/client_<k>.npz`` (+ ``federation.json``)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    digests = []
    for c in fg.clients:
        x = c.x.to_dense() if c.x.is_sparse else c.x
        arrays = {"global_ids": c.global_ids, "edge_index": c.edge_index, "x": x.float(), "y": c.y,
                  "train_mask": c.train_mask, "val_mask": c.val_mask, "test_mask": c.test_mask}
        path = client_file(out, c.index)
        atomic_write_npz(path, **{k: v.cpu().numpy() for k, v in arrays.items()})
        digests.append(_sha256(path))
    meta = {"format": FORMAT, "dataset": fg.dataset, "num_clients": fg.num_clients,
            "num_classes": int(fg.num_classes), "num_features": int(fg.num_features),
            "config": dict(fg.config), "sha256": digests,
            "pad_to": max(c.num_nodes for c in fg.clients)}
    atomic_write_json(out / META, meta)
    return out


def read_meta(directory) -> dict[str, Any]:
    """``federation.json`` of an exported federation (public metadata only)."""
    path = Path(directory) / META
    if not path.is_file():
        raise MissingDataError(f"no exported federation at {directory} ({META} missing); "
                               f"run `pace-nb flower export` first")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataCorruptionError(f"{path} is not valid JSON: {exc}") from None
    if meta.get("format") != FORMAT:
        raise DataCorruptionError(f"{path}: unsupported partition format {meta.get('format')!r}")
    return meta


def load_partition(directory, k: int) -> tuple[ClientGraph, dict[str, Any]]:
    """Client ``k``'s subgraph and the federation's public metadata, checksum-verified."""
    meta = read_meta(directory)
    if not 0 <= int(k) < int(meta["num_clients"]):
        raise ConfigError(f"partition-id {k} is outside the exported federation's 0..{meta['num_clients'] - 1}")
    path = client_file(directory, k)
    if not path.is_file():
        raise MissingDataError(f"client partition file {path} is missing")
    if _sha256(path) != meta["sha256"][int(k)]:
        raise DataCorruptionError(f"client partition file {path} does not match its checksum")
    with np.load(path, allow_pickle=False) as z:
        t = {name: torch.from_numpy(z[name].copy()) for name in _ARRAYS}
    client = ClientGraph(index=int(k), **t)
    return client, meta
