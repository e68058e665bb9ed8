"""Datasets (docs/DESIGN.md §3): registry, data roots, offline PyG loading, the ``demo`` SBM graph.

Raw files live read-only under ``<data root>/<Folder>/raw``; the data root must be trusted
(Planetoid's raw files are Python pickles by format). PyG builds a graph from them inside a
private temporary folder (symlinks to the raw files; its ``processed/`` output is deleted), and
the finished graph is cached as checksummed NPZ keyed by the raw files' sha256
(:mod:`pace_nb.data.graph_cache`): no processed ``.pt`` is ever read from a writable cache.
Downloads are never attempted: missing raw files raise :class:`MissingDataError`; unreadable
(truncated, garbage) raw files raise :class:`DataCorruptionError`.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

import numpy as np
import pandas as pd

from pace_nb.core.errors import ConfigError, DataCorruptionError, MissingDataError, PaceNBError
from pace_nb.data import graph_cache
from pace_nb.data.checks import MAX_FEATURE, prepare_graph, validate_graph  # noqa: F401 (re-exported)
from pace_nb.data.graph_paths import graph_files, is_graph_path
from pace_nb.core.registry import Registry

if TYPE_CHECKING:  # torch and PyG are imported where graphs are built: `pace-nb datasets` needs neither
    from torch_geometric.data import Data

_PLANETOID_EXT = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_WEBKB_SPLITS = tuple(f"_split_0.6_0.2_{i}.npz" for i in range(10))
_OGB_ARXIV_FILES = ("edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz",
                    "num-node-list.csv.gz", "num-edge-list.csv.gz")


@dataclass(frozen=True)
class DatasetSpec:
    """One registry entry: canonical name, folder under the data root, raw files, split."""

    name: str
    folder: str
    family: str
    files: tuple[str, ...]
    ratios: tuple[float, float, float] = (0.2, 0.4, 0.4)
    raw_subdir: str = "raw"  # path of the raw files relative to ``<root>/<folder>``
    loader: Callable[[Path], Data] | None = None  # family "custom": raw dir → Data

    @property
    def needs_files(self) -> bool:
        return self.family != "demo"


def _planetoid(name: str) -> DatasetSpec:
    return DatasetSpec(name, name, "planetoid", tuple(f"ind.{name.lower()}.{e}" for e in _PLANETOID_EXT))


def _webkb(name: str) -> DatasetSpec:
    low = name.lower()
    files = ("out1_node_feature_label.txt", "out1_graph_edges.txt") + tuple(low + s for s in _WEBKB_SPLITS)
    return DatasetSpec(name, low, "webkb", files)


#: Canonical name → spec (case-insensitive lookups). Split ratios: train/val/test inside each client (docs/DESIGN.md §4).
DATASETS: Registry = Registry("dataset")
for _spec in [
    _planetoid("Cora"), _planetoid("CiteSeer"), _planetoid("PubMed"),
    DatasetSpec("Computers", "Computers", "amazon", ("amazon_electronics_computers.npz",)),
    DatasetSpec("Photo", "Photo", "amazon", ("amazon_electronics_photo.npz",)),
    DatasetSpec("CS", "CS", "coauthor", ("ms_academic_cs.npz",)),
    DatasetSpec("ogbn-arxiv", "ogbn_arxiv", "ogb", _OGB_ARXIV_FILES, ratios=(0.6, 0.2, 0.2)),
    DatasetSpec("WikiCS", "WikiCS", "wikics", ("data.json",)),
    _webkb("Texas"), _webkb("Cornell"), _webkb("Wisconsin"),
    DatasetSpec("Actor", "Actor", "actor", ("out1_node_feature_label.txt", "out1_graph_edges.txt")
                + tuple("film" + s for s in _WEBKB_SPLITS)),
    DatasetSpec("demo", "", "demo", ()),
]:
    DATASETS.register(_spec.name, _spec)


def register_dataset(name: str, *, files: tuple[str, ...] = (), folder: str | None = None,
                     ratios: tuple[float, float, float] = (0.2, 0.4, 0.4), raw_subdir: str = "raw"):
    """Decorator: register ``fn(raw_dir: Path) -> Data`` as dataset ``name`` whose raw ``files``
    live under ``<data root>/<folder or name>/<raw_subdir>``; the result is made undirected,
    coalesced and given ``name`` / ``num_classes`` like every built-in dataset."""

    def add(fn: Callable[[Path], Data]) -> Callable[[Path], Data]:
        DATASETS.register(name, DatasetSpec(name, folder or name, "custom", tuple(files), cast("tuple[float, float, float]", tuple(ratios)), raw_subdir,
                                            loader=fn))
        return fn

    return add


def dataset_order(name: str) -> tuple[int, str]:
    """Sort key: registry order (Cora, CiteSeer, PubMed, Computers, Photo, CS, …), unknown names last."""
    names = list(DATASETS)
    return (names.index(name) if name in names else len(names), name)


def canonical_name(name: str) -> str:
    """Case-insensitive lookup of a dataset name → its canonical spelling."""
    return DATASETS.key(str(name).strip())


def get_spec(name: str) -> DatasetSpec:
    return DATASETS[canonical_name(name)]


def data_root(root: str | os.PathLike | None = None) -> Path:
    """Raw-data root: argument > ``$PACE_NB_DATA`` > ``./data``."""
    if root:
        return Path(root).expanduser().resolve()
    env = os.environ.get("PACE_NB_DATA")
    return Path(env).expanduser().resolve() if env else Path("data").resolve()


def raw_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    spec = get_spec(name)
    return data_root(root) / spec.folder / spec.raw_subdir


def missing_files(name: str, root: str | os.PathLike | None = None) -> list[str]:
    spec = get_spec(name)
    d = raw_dir(name, root)
    return [f for f in spec.files if not (d / f).is_file()]


def _require_raw(spec: DatasetSpec, root: Path) -> Path:
    d = root / spec.folder / spec.raw_subdir
    missing = [f for f in spec.files if not (d / f).is_file()]
    if missing:
        raise MissingDataError(
            f"raw files for {spec.name} not found in {d} (missing: {', '.join(missing)}); expected "
            f"files: {', '.join(spec.files)}; downloads are disabled — place them there or point "
            f"--data-root / $PACE_NB_DATA at a root holding {spec.folder}/{spec.raw_subdir}/")
    return d


def _mirror(spec: DatasetSpec, src: Path, base: Path) -> Path:
    """``base/<folder>/<raw_subdir>`` holding symlinks to the raw files (PyG writes beside them)."""
    folder = base / spec.folder
    dst = folder / spec.raw_subdir
    dst.mkdir(parents=True, exist_ok=True)
    for f in spec.files:
        (dst / f).symlink_to((src / f).resolve())
    return folder


def _finish(data: Data, spec: DatasetSpec, num_classes: int | None = None, undirected: bool = True) -> Data:
    """Common contract: float32 x, long y, undirected coalesced edges, no self loops."""
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

    validate_graph(data, f"dataset {spec.name}", num_classes)
    n = int(data.x.shape[0])
    ei = data.edge_index.long()
    if undirected:
        ei, _ = remove_self_loops(ei)
        ei = to_undirected(ei, num_nodes=n)
    ei = coalesce(ei, num_nodes=n)
    y = data.y.long().view(-1)
    out = Data(x=data.x.float().contiguous(), edge_index=ei, y=y)
    out.name = spec.name
    out.num_classes = int(num_classes if num_classes is not None else int(y.max()) + 1)
    return out


def _quiet(fn: Callable[[], Data]) -> Data:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn()


def _load_pyg(spec: DatasetSpec, root: Path) -> Data:
    from torch_geometric import datasets as D

    with graph_cache.private_build_dir() as tmp:
        return _load_pyg_in(D, spec, _mirror(spec, _require_raw(spec, root), tmp))


def _load_pyg_in(D, spec: DatasetSpec, folder: Path) -> Data:
    base = str(folder.parent)
    make = {
        "planetoid": lambda: D.Planetoid(base, spec.name),
        "amazon": lambda: D.Amazon(base, spec.name),
        "coauthor": lambda: D.Coauthor(base, spec.name),
        "webkb": lambda: D.WebKB(base, spec.name),
        "actor": lambda: D.Actor(str(folder)),
        "wikics": lambda: D.WikiCS(str(folder), is_undirected=True),
    }[spec.family]
    ds = _quiet(make)
    # Planetoid: keep PyG's standard (already undirected, coalesced) edge list untouched.
    return _finish(ds[0], spec, ds.num_classes, undirected=spec.family != "planetoid")


def _load_ogb(spec: DatasetSpec, root: Path) -> Data:
    """ogbn-arxiv from OGB's raw csv layout (``ogbn_arxiv/raw``), read with ``ogb.io``.

    ``PygNodePropPredDataset`` is avoided: it may prompt interactively and unpickles.
    """
    import torch
    from torch_geometric.data import Data

    from pace_nb.core.extras import require

    read_csv_graph_raw = require("ogb.io.read_graph_raw", "ogb", "the ogbn-arxiv loader").read_csv_graph_raw
    d = _require_raw(spec, root)
    graph = _quiet(lambda: read_csv_graph_raw(str(d)))[0]
    y = pd.read_csv(d / "node-label.csv.gz", compression="gzip", header=None).values[:, 0]
    data = Data(x=torch.from_numpy(np.asarray(graph["node_feat"], dtype=np.float32)),
                edge_index=torch.from_numpy(graph["edge_index"]).long(),
                y=torch.from_numpy(y.astype(np.int64)))
    return _finish(data, spec)


def _from_raw(spec: DatasetSpec, root: Path) -> Data:
    d = _require_raw(spec, root)
    try:
        if spec.family == "ogb":
            return _load_ogb(spec, root)
        if spec.family == "custom" and spec.loader is not None:
            return _finish(spec.loader(d), spec)
        return _load_pyg(spec, root)
    except PaceNBError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure on raw files is a bad raw file
        raise DataCorruptionError(
            f"raw files of {spec.name} in {d} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); they may be "
            f"truncated or not the original files — restore them from the original source") from None


def _load_uncached(name: str, root: str, cache: bool) -> Data:
    import torch
    from torch_geometric.data import Data

    spec = DATASETS[name]
    if spec.family == "demo":
        return make_demo()
    if not cache or spec.family == "custom":
        return _from_raw(spec, Path(root))
    raw = graph_cache.raw_checksums(_require_raw(spec, Path(root)), spec.files)
    hit = graph_cache.load(spec.name, raw)
    if hit is not None:
        arrays, num_classes = hit
        data = Data(**{k: torch.from_numpy(v) for k, v in arrays.items()})
        data.name, data.num_classes = spec.name, num_classes
        return data
    data = _from_raw(spec, Path(root))
    graph_cache.save(spec.name, raw, {k: getattr(data, k).numpy() for k in graph_cache.ARRAYS}, data.num_classes)
    return data


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, root: str, signature: tuple) -> Data:
    return _load_uncached(name, root, True)


def raw_signature(name: str, root: str | os.PathLike | None = None) -> tuple:
    """(file, size, mtime) of every raw file: a changed file gets a new in-process cache entry."""
    spec = get_spec(name)
    d = data_root(root) / spec.folder / spec.raw_subdir
    out: list[tuple[str, int | None, int | None]] = []
    for f in spec.files:
        try:
            st = (d / f).stat()
            out.append((f, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((f, None, None))
    return tuple(out)


def load_dataset(name: str, root: str | os.PathLike | None = None, *, cache: bool = True) -> Data:
    """Load a dataset as a PyG ``Data`` (x float32 raw features, undirected edges, y long).

    Adds attributes ``name`` (canonical) and ``num_classes``. Cached in-process per (name,
    resolved root, raw files' size and mtime) and on disk (:mod:`pace_nb.data.graph_cache`,
    keyed by the raw files' sha256); ``cache=False`` reads the raw files again and touches no
    cache. Treat the result as read-only.
    """
    canon = canonical_name(name)
    if not cache:
        return _load_uncached(canon, str(data_root(root)), False)
    return _load_cached(canon, str(data_root(root)), raw_signature(canon, root))


@functools.lru_cache(maxsize=64)
def _raw_checksums(name: str, root: str, signature: tuple) -> dict[str, str]:
    spec = DATASETS[name]
    return graph_cache.raw_checksums(_require_raw(spec, Path(root)), spec.files)


def _fingerprint(name: str, root: str, signature: tuple) -> str:
    spec = DATASETS[name]
    if spec.family == "demo":
        import dataclasses

        what = {"demo": dataclasses.asdict(DemoConfig()), "seed": 0, "generator": DEMO_VERSION}
    else:
        what = {"raw": _raw_checksums(name, root, signature)}
        if spec.loader is not None:
            what["loader"] = f"{spec.loader.__module__}.{spec.loader.__qualname__}"
    text = json.dumps({"dataset": name, **what}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def data_fingerprint(name: str, root: str | os.PathLike | None = None) -> str:
    """Fingerprint of the data a dataset name stands for (16 hex): the sha256 of its raw files'
    sha256s (those the graph cache keys on), or for ``demo`` its generator's parameters. Result
    cells carry it, so rows computed on changed raw files are never taken for the old ones.
    Missing raw files raise :class:`MissingDataError`. A user's graph file or folder
    (docs/OWN_DATA.md) is fingerprinted by its files' sha256s."""
    if str(name) not in DATASETS and Path(str(name)).expanduser().exists():
        path = Path(str(name)).expanduser().resolve()
        if is_graph_path(path):
            digest = hashlib.sha256()
            for f in graph_files(path):
                digest.update(f"{f.name}:{graph_cache.file_sha256(f)}\n".encode())
            return digest.hexdigest()[:16]
    canon = canonical_name(name)
    return _fingerprint(canon, str(data_root(root)), raw_signature(canon, root))


def dataset_shape(name: str, root: str | os.PathLike | None = None) -> tuple[int, int] | None:
    """(features, classes) of a dataset without loading it: the demo generator's parameters, else
    the graph cache's manifest; None when the graph is not cached (or its raw files are missing)."""
    if str(name) not in DATASETS and Path(str(name)).expanduser().exists():
        return None  # a user's graph file: its shape is known once it is loaded
    canon = canonical_name(name)
    spec = DATASETS[canon]
    if spec.family == "demo":
        return DemoConfig().vocab, DemoConfig().num_classes
    try:
        raw = _raw_checksums(canon, str(data_root(root)), raw_signature(canon, root))
    except MissingDataError:
        return None
    return graph_cache.shape(spec.name, raw)


def dataset_status(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per dataset: name, present, folder (where it looks), expected files."""
    r = data_root(root)
    rows = []
    for spec in DATASETS.values():
        if not spec.needs_files:
            rows.append(dict(name=spec.name, present=True, folder="(generated by pace_nb)",
                             expected_files="", missing=""))
            continue
        miss = missing_files(spec.name, r)
        rows.append(dict(name=spec.name, present=not miss, folder=str(r / spec.folder / spec.raw_subdir),
                         expected_files=", ".join(spec.files), missing=", ".join(miss)))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- demo graph
#: Version of the demo generator (part of its data fingerprint): raise it when make_demo changes.
DEMO_VERSION = 1


@dataclass(frozen=True)
class DemoConfig:
    """Seeded planted-partition SBM: communities with a dominant class, bag-of-words features."""

    num_nodes: int = 2400
    num_classes: int = 6
    num_communities: int = 40
    size_concentration: float = 8.0  # Dirichlet concentration of the community sizes
    purity: float = 0.85             # share of a community's nodes carrying its dominant class
    avg_degree_in: float = 6.0       # expected neighbours inside the own community
    avg_degree_out: float = 1.0      # … in all other communities
    vocab: int = 600
    words_per_node: int = 18
    topic_words: int = 40            # vocabulary slice characteristic of a class
    topic_prob: float = 0.25         # chance that a word is drawn from the own class topic


def make_demo(seed: int = 0, config: DemoConfig | None = None) -> Data:
    """The embedded ``demo`` graph (docs/DESIGN.md §3): SBM communities + class-correlated sparse binary features.

    Community c has dominant class ``c mod C``; each node keeps it with prob ``purity``
    (else a uniform class), so structure helps but does not give the labels away.
    """
    import torch
    from torch_geometric.data import Data

    cfg = config or DemoConfig()
    if cfg.num_nodes < 2 * cfg.num_communities or cfg.num_communities < cfg.num_classes:
        raise ConfigError("demo graph needs >= 2 nodes per community and >= 1 community per class")
    rng = np.random.default_rng(seed)
    n, c, m = cfg.num_nodes, cfg.num_classes, cfg.num_communities
    comm = np.sort(rng.choice(m, size=n, p=rng.dirichlet(np.full(m, cfg.size_concentration))))
    y = np.where(rng.random(n) < cfg.purity, comm % c, rng.integers(0, c, n))
    mean_size = n / m
    iu, ju = np.triu_indices(n, k=1)
    same = comm[iu] == comm[ju]
    prob = np.where(same, cfg.avg_degree_in / mean_size, cfg.avg_degree_out / (n - mean_size))
    keep = rng.random(iu.size) < prob
    ei = torch.from_numpy(np.stack([iu[keep], ju[keep]])).long()
    topic = rng.permutation(cfg.vocab)[: c * cfg.topic_words].reshape(c, cfg.topic_words)
    shape = (n, cfg.words_per_node)
    words = np.where(rng.random(shape) < cfg.topic_prob,
                     topic[y[:, None], rng.integers(0, cfg.topic_words, shape)],
                     rng.integers(0, cfg.vocab, shape))
    x = np.zeros((n, cfg.vocab), dtype=np.float32)
    x[np.repeat(np.arange(n), cfg.words_per_node), words.ravel()] = 1.0
    data = Data(x=torch.from_numpy(x), edge_index=ei, y=torch.from_numpy(y.astype(np.int64)))
    return _finish(data, DATASETS["demo"], num_classes=c)
