"""One file per data holder: a client's own subgraph, and nothing else (deployment inputs).

:func:`export_partitions` splits a :class:`~pace_nb.data.federation.FederatedGraph` into
``client_<k>.npz`` files (features, labels, local edges, masks, global ids of client k) and
``federation.json`` (public facts: dataset, K, C, F, the partition config, a sha256 of each
client file, each client's node and test-node counts, the sha256 of each client's credential — a random secret
only its file holds, which binds a partition id to its holder — and the batched trainer's layout — ``pad_to``, the largest client's node count —
so that one client alone trains bit for bit the W_L it gets in the K-client batch). A SuperNode is pointed at ONE file (``partition-dir`` + ``partition-id``) and
:func:`load_partition` reads only that file — no data root, no raw dataset, no other client.
"""
from __future__ import annotations

import hashlib
import json
import secrets
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
    digests: list[str] = []
    credentials: list[str] = []
    for c in fg.clients:
        x = c.x.to_dense() if c.x.is_sparse else c.x
        arrays = {"global_ids": c.global_ids, "edge_index": c.edge_index, "x": x.float(), "y": c.y,
                  "train_mask": c.train_mask, "val_mask": c.val_mask, "test_mask": c.test_mask}
        path = client_file(out, c.index)
        credential = secrets.token_bytes(32)
        atomic_write_npz(path, **{k: v.cpu().numpy() for k, v in arrays.items()},
                         credential=np.frombuffer(credential, dtype=np.uint8))
        digests.append(_sha256(path))
        credentials.append(hashlib.sha256(credential).hexdigest())
    meta = {"format": FORMAT, "dataset": fg.dataset, "num_clients": fg.num_clients,
            "num_classes": int(fg.num_classes), "num_features": int(fg.num_features),
            "config": dict(fg.config), "sha256": digests,
            "pad_to": max(c.num_nodes for c in fg.clients),
            "num_nodes": [int(c.num_nodes) for c in fg.clients],
            "num_test": [int(c.test_mask.sum()) for c in fg.clients], "credentials": credentials}
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
        meta["credential"] = z["credential"].tobytes() if "credential" in z.files else b""
    client = ClientGraph(index=int(k), **t)
    return client, meta


# ----------------------------------------------------------------------------- the evaluator's file
EVALUATION = "evaluation.npz"


class EvaluationGraph:
    """The complete graph and the union of the clients' masks: what a complete-graph evaluation
    (SPEAR's protocol: the global model on the whole graph) reads, and nothing of any client's
    partition. It answers the :class:`~pace_nb.data.federation.FederatedGraph` attributes that
    evaluation uses (``data``, ``global_mask``, ``num_classes``, ``num_features``, ``num_clients``,
    ``dataset``, ``config``)."""

    def __init__(self, dataset: str, x, edge_index, y, masks: dict[str, torch.Tensor], num_classes: int,
                 num_clients: int, config: dict):
        from types import SimpleNamespace

        self.dataset, self.num_classes, self.num_clients, self.config = dataset, int(num_classes), int(num_clients), config
        self.data = SimpleNamespace(x=x, edge_index=edge_index, y=y, num_nodes=int(x.shape[0]))
        self._masks = masks

    @property
    def num_features(self) -> int:
        return int(self.data.x.shape[1])

    def global_mask(self, split: str) -> torch.Tensor:
        return self._masks[split].clone()


def export_evaluation(fg, directory) -> Path:
    """Write the evaluator's ``directory/evaluation.npz``: the complete graph (features, labels,
    edges), the union of the clients' train/val/test masks, and the federation's public facts."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    d = fg.data
    x = d.x.to_dense() if d.x.is_sparse else d.x
    arrays = {"x": x, "edge_index": d.edge_index, "y": d.y.view(-1),
              **{f"{s}_mask": fg.global_mask(s) for s in ("train", "val", "test")}}
    meta = json.dumps({"format": FORMAT, "dataset": fg.dataset, "num_clients": fg.num_clients,
                       "num_classes": int(fg.num_classes), "config": dict(fg.config)}, default=str)
    path = out / EVALUATION
    atomic_write_npz(path, meta=np.frombuffer(meta.encode(), dtype=np.uint8),
                     **{k: v.cpu().numpy() for k, v in arrays.items()})
    return path


def load_evaluation(path) -> EvaluationGraph:
    """The :class:`EvaluationGraph` of an :func:`export_evaluation` file (a folder holding it, or the file)."""
    p = Path(path)
    p = p / EVALUATION if p.is_dir() else p
    if not p.is_file():
        raise MissingDataError(f"no evaluation file at {p} (write it with pace_nb.flower.partitions.export_evaluation)")
    try:
        with np.load(p, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
            t = {k: torch.from_numpy(z[k].copy()) for k in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask")}
    except (OSError, KeyError, ValueError) as exc:
        raise DataCorruptionError(f"{p} is not an evaluation file: {exc}") from None
    if meta.get("format") != FORMAT:
        raise DataCorruptionError(f"{p}: unsupported evaluation format {meta.get('format')!r}")
    masks = {s: t.pop(f"{s}_mask") for s in ("train", "val", "test")}
    return EvaluationGraph(meta["dataset"], t["x"], t["edge_index"], t["y"], masks, meta["num_classes"],
                           meta["num_clients"], meta["config"])
