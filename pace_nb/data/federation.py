"""Federated graphs: client subgraphs, local→global maps, masks, partition cache (docs/DESIGN.md §4).

``build_federated`` = partition (``pace_nb.data.partition``) + induced client subgraphs +
stratified train/val/test masks, cached on disk (NPZ + JSON with a sha256 checksum, never
pickle) and in-process.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pace_nb.data import datasets as data_mod
from pace_nb.core.config import DATA_SEED, cache_dir, check_writable
from pace_nb.core.errors import ConfigError
from pace_nb.core.io import atomic_write_json, atomic_write_npz
from pace_nb.core.validation import check_seed
from pace_nb.data.graph_cache import array_checksum, safe_name
from pace_nb.data.partition import partition_nodes, validate

SPLITS = ("train", "val", "test")
CACHE_VERSION = 1


@dataclass
class ClientGraph:
    """One client's induced subgraph (cross-client edges dropped).

    Attributes: ``index`` client id; ``global_ids [n]`` sorted global node ids (local→global
    map); ``edge_index [2, e]`` local ids, both directions, no self loops; ``x [n, F]``
    float32 features as PyG loads them; ``y [n]`` labels; ``train_mask/val_mask/test_mask
    [n]`` bool, disjoint.
    """

    index: int
    global_ids: Tensor
    edge_index: Tensor
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.global_ids.numel())


@dataclass
class FederatedGraph:
    """A dataset split among K clients. ``data`` is the complete graph (PyG ``Data``)."""

    dataset: str
    data: Any
    clients: list[ClientGraph]
    num_classes: int
    config: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    @property
    def num_features(self) -> int:
        return int(self.clients[0].x.shape[1])

    def global_mask(self, split: str) -> Tensor:
        """Union of the clients' ``split`` masks ("train", "val", "test") over the global graph."""
        n = int(self.data.num_nodes)
        mask = torch.zeros(n, dtype=torch.bool)
        for c in self.clients:
            mask[c.global_ids[getattr(c, f"{split}_mask")]] = True
        return mask

    def to_json_dict(self) -> dict:
        """``{"clients": [[global ids]], "masks": {split: [[global ids]]}, "config": {...}}``."""
        return {
            "clients": [c.global_ids.tolist() for c in self.clients],
            "masks": {sp: [c.global_ids[getattr(c, f"{sp}_mask")].tolist() for c in self.clients]
                      for sp in SPLITS},
            "config": dict(self.config),
        }

    def summary(self) -> pd.DataFrame:
        """One row per client: nodes, edges (undirected), split sizes, classes, label histogram."""
        rows = []
        for c in self.clients:
            hist = torch.bincount(c.y, minlength=self.num_classes).tolist()
            rows.append(dict(client=c.index, nodes=c.num_nodes, edges=int(c.edge_index.shape[1]) // 2,
                             train=int(c.train_mask.sum()), val=int(c.val_mask.sum()),
                             test=int(c.test_mask.sum()), classes=sum(h > 0 for h in hist),
                             majority=round(max(hist) / max(c.num_nodes, 1), 3),
                             labels=" ".join(map(str, hist))))
        return pd.DataFrame(rows)


# ------------------------------------------------------------------ masks
def _floor(x: float) -> int:
    return int(math.floor(round(x, 9)))


def check_ratios(ratios) -> tuple[float, float, float]:
    r = tuple(float(v) for v in ratios)
    if len(r) != 3 or min(r) < 0 or not math.isclose(sum(r), 1.0, abs_tol=1e-6):
        raise ConfigError(f"split ratios must be three non-negative numbers summing to 1, got {ratios!r}")
    return r


def stratified_masks(y_local, rng: np.random.Generator, ratios=(0.2, 0.4, 0.4)) -> tuple[Tensor, Tensor, Tensor]:
    """Per class: shuffle, cut at ⌊r_train·n⌋ and ⌊(r_train+r_val)·n⌋ → disjoint train/val/test masks."""
    r = check_ratios(ratios)
    y = np.asarray(y_local.cpu() if isinstance(y_local, Tensor) else y_local)
    split = np.full(y.shape[0], 2, dtype=np.int64)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        a, b = _floor(r[0] * idx.size), _floor((r[0] + r[1]) * idx.size)
        split[idx[:a]] = 0
        split[idx[a:b]] = 1
    s = torch.from_numpy(split)
    return s == 0, s == 1, s == 2


# ------------------------------------------------------------------ building
def induced_edges(edge_index: Tensor, parts: list[Tensor], num_nodes: int) -> list[Tensor]:
    """Local edge lists of the induced client subgraphs (cross-client edges dropped), one pass over E.

    Client ids must be sorted, so local ids keep the global edge order.
    """
    owner = np.full(num_nodes, -1, dtype=np.int64)
    local = np.empty(num_nodes, dtype=np.int64)
    for k, gid in enumerate(parts):
        owner[gid.numpy()] = k
        local[gid.numpy()] = np.arange(gid.numel())
    src, dst = edge_index.cpu().numpy()
    keep = owner[src] == owner[dst]
    src, dst = src[keep], dst[keep]
    order = np.argsort(owner[src], kind="stable")
    counts = np.bincount(owner[src], minlength=len(parts))
    ei = torch.from_numpy(np.stack([local[src[order]], local[dst[order]]]))
    return list(torch.split(ei, counts.tolist(), dim=1))


def _clients(data, parts: list[np.ndarray], splits: list[Tensor]) -> list[ClientGraph]:
    gids = [torch.as_tensor(np.asarray(p), dtype=torch.long) for p in parts]
    edges = induced_edges(data.edge_index, gids, int(data.num_nodes))
    return [ClientGraph(k, g, e.contiguous(), data.x[g], data.y[g], s == 0, s == 1, s == 2)
            for k, (g, e, s) in enumerate(zip(gids, edges, splits))]


def build_clients(data, parts: list[np.ndarray], seed: int, ratios) -> list[ClientGraph]:
    """Induced client subgraphs with masks drawn from one stream seeded by the data seed."""
    rng = np.random.default_rng(seed)
    parts = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    splits = []
    for p in parts:
        tr, va, _ = stratified_masks(data.y[torch.from_numpy(p)], rng, ratios)
        splits.append(torch.where(tr, 0, torch.where(va, 1, 2)))
    return _clients(data, parts, splits)


def _fingerprint(data) -> str:
    h = hashlib.sha256()
    for t in (data.edge_index, data.y) + tuple(getattr(data, k) for k in ("client", "split") if k in data):
        h.update(np.ascontiguousarray(t.cpu().numpy()).tobytes())
    h.update(f"{int(data.num_nodes)}|{tuple(data.x.shape)}".encode())
    return h.hexdigest()[:16]


def _cache_paths(config: dict) -> tuple[Path, Path]:
    """Cache files of a federation; the name part is sanitized (a ``Data.name`` never escapes)."""
    key = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    stem = safe_name(f"{config['dataset']}_{config['scheme']}_K{config['num_clients']}_s{config['seed']}_{key}")
    d = cache_dir() / "partitions"
    return d / f"{stem}.npz", d / f"{stem}.json"


def _save_cache(config: dict, clients: list[ClientGraph]) -> None:
    arrays = {
        "offsets": np.cumsum([0] + [c.num_nodes for c in clients]).astype(np.int64),
        "nodes": torch.cat([c.global_ids for c in clients]).numpy(),
        "split": torch.cat([torch.where(c.train_mask, 0, torch.where(c.val_mask, 1, torch.where(c.test_mask, 2, 3)))
                            for c in clients]).numpy().astype(np.int8),
    }
    npz, meta = _cache_paths(config)
    npz.parent.mkdir(parents=True, exist_ok=True)
    check_writable(npz.parent, "cache folder", "; point $PACE_NB_CACHE at a writable folder or use --no-cache")
    atomic_write_npz(npz, **arrays)
    atomic_write_json(meta, {"version": CACHE_VERSION, "config": config, "sha256": array_checksum(arrays)})


def _check_cached(arrays: dict, num_nodes: int, num_clients: int) -> None:
    """Contents of a partition cache that passed its checksum: still a valid partition?"""
    off, nodes, split = arrays["offsets"], arrays["nodes"], arrays["split"]
    if off.ndim != 1 or off.size != num_clients + 1 or off[0] != 0 or off[-1] != nodes.size or split.size != nodes.size:
        raise ValueError(f"offsets do not describe {num_clients} clients over {nodes.size} nodes")
    if (np.diff(off) <= 0).any():
        raise ValueError("a client is empty")
    if nodes.size and (nodes.min() < 0 or nodes.max() >= num_nodes):
        raise ValueError(f"node ids outside [0, {num_nodes})")
    if np.unique(nodes).size != nodes.size:
        raise ValueError("a node belongs to two clients")
    if not np.isin(split, (0, 1, 2, 3)).all():
        raise ValueError("split codes other than 0/1/2/3 (train/val/test/none)")


def _load_cache(config: dict, num_nodes: int):
    """(parts, split codes per client) from disk, or None; a bad cache warns and returns None."""
    npz, meta = _cache_paths(config)
    if not npz.exists() and not meta.exists():
        return None
    try:
        info = json.loads(meta.read_text())
        if info.get("version") != CACHE_VERSION or info.get("config") != config:
            raise ValueError("its configuration does not match")
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("offsets", "nodes", "split")}
        if array_checksum(arrays) != info.get("sha256"):
            raise ValueError("checksum mismatch")
        off = arrays["offsets"]
        _check_cached(arrays, num_nodes, int(config["num_clients"]))
    except Exception as exc:  # noqa: BLE001 — any defect means: rebuild
        warnings.warn(f"partition cache {npz.name} is corrupted or mismatched ({exc}); rebuilding it",
                      RuntimeWarning, stacklevel=3)
        return None
    sl = [slice(off[i], off[i + 1]) for i in range(off.size - 1)]
    return [arrays["nodes"][s] for s in sl], [arrays["split"][s] for s in sl]


def given_parts(data, name: str) -> list[np.ndarray]:
    """The user's silos (``--partition given``): client k's sorted node ids from ``data.client``."""
    client = getattr(data, "client", None) if "client" in data else None
    if client is None:
        raise ConfigError(f"{name}: the 'given' partition needs a per-node client column ('client' in the NPZ, "
                          f"clients.csv in a folder); this graph has none")
    c = client.cpu().numpy()
    return [np.flatnonzero(c == k) for k in range(int(c.max()) + 1)]


def check_silos(clients: list[ClientGraph], name: str) -> None:
    """Every user-defined client (given silos or file masks) holds training nodes."""
    for c in clients:
        if not bool(c.train_mask.any()):
            raise ConfigError(f"{name}: client {c.index} has no training nodes ({c.num_nodes} nodes, "
                              f"{int(c.val_mask.sum())} val, {int(c.test_mask.sum())} test); give it training "
                              f"nodes or merge it into another client")


def _build(data, name: str, scheme: str, num_clients, seed: int, cache: bool, resolution: float,
           delta: int, beta, ratios, fallback: str) -> FederatedGraph:
    given = scheme == "given"
    if given:
        k = len(given_parts(data, name))
        if beta is not None:
            raise ConfigError("beta only applies to the dirichlet scheme, not given")
    else:
        scheme, k = validate(int(data.num_nodes), num_clients, scheme, beta)
    file_split = getattr(data, "split", None) if "split" in data else None
    if ratios is None:
        ratios = data_mod.DATASETS[name].ratios if name in data_mod.DATASETS else (0.2, 0.4, 0.4)
    ratios = check_ratios(ratios)
    if scheme != "dirichlet" and beta is not None:
        raise ConfigError(f"beta only applies to the dirichlet scheme, not {scheme}")
    louvain = scheme == "louvain"  # parameters that do not apply are recorded as None
    if louvain:
        if not (isinstance(resolution, (int, float)) and math.isfinite(resolution) and resolution > 0):
            raise ConfigError(f"Louvain resolution must be a finite number > 0, got {resolution!r}")
        if isinstance(delta, bool) or not isinstance(delta, int) or delta < 1:
            raise ConfigError(f"Louvain size slack delta must be an integer >= 1, got {delta!r}")
    config = dict(dataset=name, scheme=scheme, num_clients=k, seed=int(seed),
                  resolution=float(resolution) if louvain else None, delta=int(delta) if louvain else None,
                  beta=None if beta is None else float(beta), ratios=list(ratios),
                  louvain_fallback=fallback if louvain else None, data_fingerprint=_fingerprint(data))
    if file_split is not None:
        config["masks"] = "file"
    cached = _load_cache(config, int(data.num_nodes)) if cache else None
    if cached is not None:
        parts, codes = cached
        clients = _clients(data, parts, [torch.as_tensor(c.astype(np.int64)) for c in codes])
    else:
        kw = dict(resolution=resolution, delta=delta, fallback=fallback) if scheme == "louvain" else \
            dict(beta=beta) if scheme == "dirichlet" else {}
        parts = given_parts(data, name) if given else partition_nodes(data, scheme, k, seed, **kw)
        if file_split is None:
            clients = build_clients(data, parts, int(seed), ratios)
        else:
            codes = file_split.long()
            clients = _clients(data, parts, [codes[torch.from_numpy(np.asarray(p))] for p in parts])
        if cache:
            _save_cache(config, clients)
    if given or file_split is not None:
        check_silos(clients, name)
    return FederatedGraph(name, data, clients, int(data.num_classes), config)


def _build_uncached(name, root, scheme, num_clients, seed, cache, resolution, delta, beta, ratios, fallback,
                    signature=()):
    data = data_mod.load_dataset(name, root or None, cache=cache)
    return _build(data, name, scheme, num_clients, seed, cache, resolution, delta, beta, ratios, fallback)


#: In-process memo; ``signature`` (raw files' size/mtime) makes a changed raw file a new entry.
_build_named = functools.lru_cache(maxsize=32)(_build_uncached)


def build_federated(dataset, scheme: str = "louvain", num_clients: int = 10, seed: int = DATA_SEED, *,
                    data_root: str | os.PathLike | None = None, cache: bool = True, resolution: float = 1.0,
                    delta: int = 20, beta: float | None = None, ratios=None,
                    fallback: str = "openfgl") -> FederatedGraph:
    """Split a dataset (name or PyG ``Data``) among ``num_clients`` clients (docs/DESIGN.md §4).

    Partition and masks are seeded by ``seed`` (the data seed): the same arguments give
    bit-identical clients. ``beta`` is required for (and only for) ``scheme="dirichlet"``;
    ``ratios`` default to the registry's split. Results are cached on disk under
    ``cache_dir()/partitions`` and in-process; treat the returned object as read-only.
    """
    ratios_t = None if ratios is None else tuple(float(r) for r in ratios)
    if isinstance(dataset, (str, os.PathLike)) and str(dataset) not in data_mod.DATASETS:
        from pace_nb.data import userdata

        if userdata.is_graph_path(dataset):
            dataset = userdata.load_graph(dataset, cache=cache)
    beta_v = None if beta is None else float(beta)
    if isinstance(dataset, (str, os.PathLike)):
        name = data_mod.canonical_name(str(dataset))
        root = str(data_mod.data_root(data_root)) if data_mod.DATASETS[name].needs_files else ""
        check_seed(seed, "data seed")
        build = _build_named if cache else _build_uncached  # cache=False bypasses every cache
        sig = data_mod.raw_signature(name, root or None) if data_mod.DATASETS[name].needs_files else ()
        return build(name, root, str(scheme).lower(), num_clients, int(seed), bool(cache),
                     _num(resolution, "Louvain resolution"), _int(delta, "Louvain delta"), beta_v, ratios_t,
                     fallback, sig)
    if not hasattr(dataset, "edge_index") or getattr(dataset, "y", None) is None:
        raise ConfigError("dataset must be a dataset name or a PyG Data with x, edge_index and y")
    check_seed(seed, "data seed")
    given = getattr(dataset, "num_classes", None)
    dataset = data_mod.prepare_graph(dataset, "custom Data", given if isinstance(given, int) and given > 0 else None)
    name = dataset.name
    return _build(dataset, name, str(scheme).lower(), num_clients, int(seed), bool(cache),
                  _num(resolution, "Louvain resolution"), _int(delta, "Louvain delta"), beta_v, ratios_t, fallback)


def _num(v, what: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number, got {v!r}") from None


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        if not (isinstance(v, float) and v.is_integer()):
            raise ConfigError(f"{what} must be an integer, got {v!r}")
    return int(v)
