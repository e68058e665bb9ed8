"""A user's own graph from a file: one NPZ or a folder of plain files (docs/OWN_DATA.md).

**NPZ** (read with ``np.load(allow_pickle=False)``; unknown keys are an error):

    edge_index   [2, E] integers (any width), node ids in [0, N)
    x            [N, F] numbers — or its CSR parts x_data, x_indices, x_indptr, x_shape
    y            [N] integer labels 0..C-1 (every class with >= 2 nodes)
    train_mask, val_mask, test_mask   optional, [N] bool or 0/1, disjoint (all three or none)
    client       optional, [N] integer silo ids 0..K-1 (``--partition given``)

**Folder**: ``edges.csv`` (two integer columns source,target), ``features.csv`` or
``features.npy`` (N rows × F numbers), ``labels.csv`` (N integers), optional ``clients.csv``
(N integers) and ``split.csv`` (N words train|val|test|none). Row i is node i; a first line
that is not numeric is a header and must name every column (there is no index column).

Everything is validated before any training (one-line :class:`ConfigError` naming the field);
the graph is then made undirected and coalesced without self loops like every registered
dataset, and cached as checksummed NPZ keyed by the files' sha256 (:mod:`pace_nb.data.graph_cache`).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from pace_nb.core.errors import ConfigError, MissingDataError
from pace_nb.data import graph_cache
from pace_nb.data.graph_paths import FOLDER_FILES, graph_files, is_graph_path

NPZ_KEYS = ("edge_index", "x", "x_data", "x_indices", "x_indptr", "x_shape", "y",
            "train_mask", "val_mask", "test_mask", "client")
MASKS = ("train_mask", "val_mask", "test_mask")
SPLIT_WORDS = {"train": 0, "val": 1, "test": 2, "none": 3, "": 3}
#: Split code of a node in no mask (codes 0/1/2 are train/val/test, as in the partition cache).
NO_SPLIT = 3
#: Largest dense feature matrix a file may expand to (float32 bytes).
MAX_DENSE_BYTES = 8 << 30
OPTIONAL = ("client", "split")


def _err(where: str, field: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {field}: {msg}")


# ------------------------------------------------------------------ field checks (pure)
def as_ids(a: np.ndarray, where: str, field: str, upper: int | None = None) -> np.ndarray:
    """Integers of any width → int64; floats, bools, values outside [0, upper) are errors."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise _err(where, field, f"has dtype {a.dtype}; it must hold integers")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        limit = np.iinfo(np.int64).max if upper is None else upper
        if lo < 0 or hi >= limit:
            raise _err(where, field, f"holds ids in [{lo}, {hi}], outside [0, {limit - 1}]"
                       + (f" (N = {upper})" if upper is not None else ""))
    return a.astype(np.int64)


def as_features(x: np.ndarray, where: str, field: str = "x") -> np.ndarray:
    """A finite float32 ``[N, F]`` matrix (numbers of any dtype; overflow of float32 is an error)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise _err(where, field, f"must have shape [N, F], got {list(x.shape)}")
    if x.dtype.kind not in "biuf":
        raise _err(where, field, f"has dtype {x.dtype}; features must be numbers")
    with np.errstate(over="ignore", invalid="ignore"):
        out = x.astype(np.float32)
    bad = ~np.isfinite(out)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise _err(where, field, f"{int(bad.sum())} value(s) are NaN/inf or overflow float32 "
                   f"(first at node {r}, feature {c}); features must be finite")
    return out


def csr_features(data, indices, indptr, shape, where: str) -> np.ndarray:
    """Dense float32 features from CSR parts, each checked before use."""
    import scipy.sparse as sp

    shape = as_ids(np.asarray(shape).ravel(), where, "x_shape")
    if shape.size != 2 or shape.min() < 1:
        raise _err(where, "x_shape", f"must be two integers [N, F] >= 1, got {shape.tolist()}")
    n, f = int(shape[0]), int(shape[1])
    if n * f * 4 > MAX_DENSE_BYTES:
        raise _err(where, "x_shape", f"[{n}, {f}] expands to {n * f * 4 / 2**30:.1f} GiB of dense float32 "
                   f"features (limit {MAX_DENSE_BYTES / 2**30:.0f} GiB)")
    indptr = as_ids(np.asarray(indptr), where, "x_indptr")
    values = as_features(np.asarray(data).reshape(-1, 1), where, "x_data").ravel()
    indices = as_ids(np.asarray(indices), where, "x_indices", upper=f)
    if indptr.ndim != 1 or indptr.size != n + 1 or indptr[0] != 0 or (np.diff(indptr) < 0).any():
        raise _err(where, "x_indptr", f"must be {n + 1} non-decreasing offsets starting at 0")
    if indices.ndim != 1 or indices.size != values.size or indptr[-1] != values.size:
        raise _err(where, "x_indices", f"x_indices ({indices.size}), x_data ({values.size}) and x_indptr[-1] "
                   f"({int(indptr[-1])}) must agree")
    return sp.csr_matrix((values, indices, indptr), shape=(n, f)).toarray().astype(np.float32)


def as_labels(y: np.ndarray, n: int, where: str, field: str = "y") -> tuple[np.ndarray, int]:
    """Labels 0..C-1, one per node, every class holding >= 2 nodes → (int64 labels, C)."""
    y = np.asarray(y)
    if y.ndim != 1 or y.size != n:
        raise _err(where, field, f"must have shape [N] = [{n}] (one label per node), got {list(y.shape)}")
    y = as_ids(y, where, field, upper=n)  # bounded before np.bincount allocates max(y) + 1 counts
    counts = np.bincount(y)
    small = np.flatnonzero(counts < 2)
    if small.size:
        c = int(small[0])
        raise _err(where, field, f"labels must be 0..C-1 with >= 2 nodes per class (C = {counts.size}); "
                   f"class {c} has {int(counts[c])} node(s)")
    return y, int(counts.size)


def as_split(masks: dict[str, np.ndarray], n: int, where: str) -> np.ndarray | None:
    """Three disjoint ``[N]`` masks → split codes (0 train, 1 val, 2 test, 3 none); None if absent."""
    given = [m for m in MASKS if m in masks]
    if not given:
        return None
    if len(given) != 3:
        missing = [m for m in MASKS if m not in masks]
        raise _err(where, missing[0], "missing: give all three of train_mask, val_mask, test_mask or none")
    split = np.full(n, NO_SPLIT, dtype=np.int8)
    taken = np.zeros(n, dtype=bool)
    for code, name in enumerate(MASKS):
        m = np.asarray(masks[name])
        if m.ndim != 1 or m.size != n:
            raise _err(where, name, f"must have shape [N] = [{n}], got {list(m.shape)}")
        if m.dtype != bool:
            if m.dtype.kind not in "iu" or not np.isin(m, (0, 1)).all():
                raise _err(where, name, f"must be bool or 0/1, got dtype {m.dtype}")
            m = m.astype(bool)
        if (m & taken).any():
            raise _err(where, name, f"overlaps an earlier mask at node {int(np.flatnonzero(m & taken)[0])}")
        taken |= m
        split[m] = code
    if not (split == 0).any():
        raise _err(where, "train_mask", "selects no node")
    return split


def finish(edge_index, x, y, where: str, client=None, split=None, name: str = "graph") -> Data:
    """Validated arrays → ``Data`` (undirected, coalesced, no self loops) with ``client``/``split``."""
    x = as_features(x, where)
    n = int(x.shape[0])
    if n == 0:
        raise _err(where, "x", "the graph has no nodes")
    ei = np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise _err(where, "edge_index", f"must have shape [2, E], got {list(ei.shape)}")
    ei = as_ids(ei, where, "edge_index", upper=n)
    y, num_classes = as_labels(y, n, where)
    e = torch.from_numpy(ei)
    e, _ = remove_self_loops(e)
    if e.shape[1] == 0:
        raise _err(where, "edge_index", "the graph has no edges (besides self loops)")
    e = coalesce(to_undirected(e, num_nodes=n), num_nodes=n)
    data = Data(x=torch.from_numpy(x), edge_index=e, y=torch.from_numpy(y))
    if client is not None:
        c = np.asarray(client)
        if c.ndim != 1 or c.size != n:
            raise _err(where, "client", f"must have shape [N] = [{n}], got {list(c.shape)}")
        c = as_ids(c, where, "client", upper=n)  # K <= N: bounded before np.bincount allocates
        empty = np.flatnonzero(np.bincount(c) == 0)
        if empty.size:
            raise _err(where, "client", f"ids must be 0..K-1 with every client holding nodes; client "
                       f"{int(empty[0])} has none")
        data.client = torch.from_numpy(c)
    if split is not None:
        data.split = torch.from_numpy(np.asarray(split, dtype=np.int8))
    data.name, data.num_classes = name, num_classes
    return data


# ------------------------------------------------------------------ readers (I/O)
def _read_npz(path: Path) -> dict[str, np.ndarray]:
    where = str(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            unknown = sorted(set(z.files) - set(NPZ_KEYS))
            if unknown:
                raise _err(where, unknown[0], f"unknown field; valid fields: {', '.join(NPZ_KEYS)}")
            out = {}
            for k in z.files:
                try:
                    out[k] = z[k]
                except ValueError:
                    raise _err(where, k, "holds Python objects (pickled); store plain numeric arrays") from None
            return out
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - not a readable NPZ
        raise ConfigError(f"{where}: not a readable NPZ file ({type(exc).__name__}: {str(exc)[:120]})") from None


def _read_csv(path: Path, what: str) -> np.ndarray:
    """A numeric CSV as a 2-D array. A non-numeric first line is a header, and it must name every
    column: pandas would take the first column of rows wider than the header as an index, and read
    ``s,t,7`` under ``source,target`` as the edge (t, 7)."""
    import pandas as pd

    with open(path, encoding="utf-8", errors="replace") as fh:
        at, first = next(((i, line) for i, line in enumerate(fh) if line.strip() and not line.lstrip().startswith("#")),
                         (-1, ""))
    try:
        [float(t) for t in first.replace(";", ",").split(",") if t.strip()]
        names = None
    except ValueError:
        names = [t.strip() for t in first.rstrip("\r\n").split(",")]
    try:
        frame = pd.read_csv(path, header=None, skiprows=[at] if names else None, comment="#", skipinitialspace=True)
    except Exception as exc:  # noqa: BLE001 - any parse failure of a user file
        raise ConfigError(f"{path}: {what}: cannot be parsed as CSV ({type(exc).__name__}: {str(exc)[:120]})") from None
    if names is not None and len(names) != frame.shape[1]:
        raise ConfigError(f"{path}: {what}: the header names {len(names)} column(s) but the rows hold "
                          f"{frame.shape[1]}; a header must name every column (there is no index column)")
    bad = [i for i, c in enumerate(frame.columns) if frame[c].dtype.kind not in "biuf"]
    if bad:
        label = repr(names[bad[0]]) if names else str(bad[0] + 1)
        raise ConfigError(f"{path}: {what}: column {label} is not numeric")
    return frame.to_numpy()


def _column(path: Path, what: str) -> np.ndarray:
    a = _read_csv(path, what)
    if a.ndim != 2 or a.shape[1] != 1:
        raise ConfigError(f"{path}: {what}: must hold one column, got {a.shape[1]}")
    return a[:, 0]


def _read_split(path: Path, n: int) -> np.ndarray:
    words = [w.strip().lower() for w in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    if words and words[0] == "split":
        words = words[1:]
    if len(words) != n:
        raise ConfigError(f"{path}: split: must hold one line per node ({n}), got {len(words)}")
    bad = [w for w in words if w not in SPLIT_WORDS]
    if bad:
        raise ConfigError(f"{path}: split: {bad[0]!r} is not one of train, val, test, none")
    split = np.array([SPLIT_WORDS[w] for w in words], dtype=np.int8)
    if not (split == 0).any():
        raise ConfigError(f"{path}: split: no node is marked train")
    return split


def _read_folder(path: Path) -> dict:
    for need in ("edges.csv", "labels.csv"):
        if not (path / need).is_file():
            raise MissingDataError(f"{path}: {need} not found; a graph folder holds {', '.join(FOLDER_FILES)}")
    feats = [f for f in ("features.csv", "features.npy") if (path / f).is_file()]
    if len(feats) != 1:
        raise ConfigError(f"{path}: give exactly one of features.csv, features.npy (found {len(feats)})")
    edges = _read_csv(path / "edges.csv", "edges")
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ConfigError(f"{path / 'edges.csv'}: edges: must hold two columns (source, target), got {edges.shape[1]}")
    if feats[0].endswith(".npy"):
        try:
            x = np.load(path / "features.npy", allow_pickle=False)
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"{path / 'features.npy'}: features: not a readable numeric .npy "
                              f"({type(exc).__name__})") from None
    else:
        x = _read_csv(path / "features.csv", "features")
    y = _column(path / "labels.csv", "labels")
    out = dict(edge_index=edges.T, x=x, y=y)
    if (path / "clients.csv").is_file():
        out["client"] = _column(path / "clients.csv", "clients")
    if (path / "split.csv").is_file():
        out["split"] = _read_split(path / "split.csv", int(np.asarray(x).shape[0]))
    return out


def _parse(path: Path, name: str) -> Data:
    where = str(path)
    if path.is_dir():
        a = _read_folder(path)
        split = a.pop("split", None)
    else:
        a = _read_npz(path)
        if "x" in a and "x_data" in a:
            raise _err(where, "x", "give either x or its CSR parts x_data/x_indices/x_indptr/x_shape, not both")
        if "x" not in a:
            parts = ("x_data", "x_indices", "x_indptr", "x_shape")
            missing = [k for k in parts if k not in a]
            if len(missing) == 4:
                raise _err(where, "x", "missing (dense x or CSR parts x_data/x_indices/x_indptr/x_shape)")
            if missing:
                raise _err(where, missing[0], "missing (CSR features need all four parts)")
            values, indices, indptr, shape = (a.pop(k) for k in parts)
            a["x"] = csr_features(values, indices, indptr, shape, where)
        for need in ("edge_index", "y"):
            if need not in a:
                raise _err(where, need, "missing")
        n = int(np.asarray(a["x"]).shape[0]) if np.asarray(a["x"]).ndim else 0
        split = as_split({m: a.pop(m) for m in MASKS if m in a}, n, where)
    return finish(a["edge_index"], a["x"], a["y"], where, a.get("client"), split, name)


def graph_name(path: Path) -> str:
    """The dataset name rows carry: the file's stem (``file:<stem>`` when it is a registered name)."""
    from pace_nb.data.datasets import DATASETS

    stem = graph_cache.safe_name(path.stem if path.is_file() else path.name)
    return f"file:{stem}" if stem in DATASETS else stem


def signature(path: Path) -> tuple:
    """(file, size, mtime) of every file of a graph: a changed file is a new in-process entry."""
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in graph_files(path))


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, sig: tuple, cache: bool) -> Data:
    p = Path(path)
    name = graph_name(p)
    if not cache:
        return _parse(p, name)
    raw = {f.name: graph_cache.file_sha256(f) for f in graph_files(p)}
    hit = graph_cache.load(f"file-{name}", raw, optional=OPTIONAL)
    if hit is not None:
        arrays, num_classes = hit
        data = Data(**{k: torch.from_numpy(v) for k, v in arrays.items()})
        data.name, data.num_classes = name, num_classes
        return data
    data = _parse(p, name)
    keys = graph_cache.ARRAYS + tuple(k for k in OPTIONAL if k in data)
    graph_cache.save(f"file-{name}", raw, {k: getattr(data, k).numpy() for k in keys}, data.num_classes)
    return data


def load_graph(path, *, cache: bool = True) -> Data:
    """A user's graph file or folder as a validated PyG ``Data`` (attributes ``name``,
    ``num_classes``, and ``client`` / ``split`` when the file gives them). Treat it as read-only."""
    p = Path(path).expanduser()
    if not p.exists():
        raise MissingDataError(f"graph {path}: no such file or folder")
    if not (p.is_dir() or (p.is_file() and p.suffix.lower() == ".npz")):
        raise ConfigError(f"graph {path}: must be an .npz file or a folder holding edges.csv, features, labels.csv")
    p = p.resolve()
    return _load_cached(str(p), signature(p), bool(cache))


def example_graph(dataset: str, clients: int = 10, *, seed: int = 2024, data_root=None) -> Path:
    """A registered dataset with its METIS split into ``clients`` silos written as a graph NPZ
    with a ``client`` column (docs/OWN_DATA.md's worked example) → its path under the cache."""
    from pace_nb.core.config import cache_dir
    from pace_nb.data.datasets import canonical_name, load_dataset
    from pace_nb.data.partition import partition_nodes

    name = canonical_name(dataset)
    data = load_dataset(name, data_root)
    client = np.empty(int(data.num_nodes), dtype=np.int64)
    for k, ids in enumerate(partition_nodes(data, "metis", clients, seed)):
        client[ids] = k
    path = cache_dir() / "examples" / f"{graph_cache.safe_name(name.lower())}_metis{int(clients)}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_graph(path, data, client)


def save_graph(path, data, client=None) -> Path:
    """Write ``data`` (``x``, ``edge_index``, ``y``; optional per-node ``client`` ids) as a graph NPZ."""
    from pace_nb.core.io import atomic_write_npz

    arrays = dict(edge_index=data.edge_index.cpu().numpy(), x=data.x.cpu().numpy(), y=data.y.cpu().numpy())
    if client is not None:
        arrays["client"] = np.asarray(client, dtype=np.int64)
    return atomic_write_npz(Path(path), **arrays)
