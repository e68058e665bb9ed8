"""Dataset registry, data roots, offline loading through a writable mirror, demo graph."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import stat

import numpy as np
import pytest
import torch
from torch_geometric.utils import contains_self_loops, is_undirected

from conftest import DATA_ROOT, require_dataset
from pace_nb.data import datasets as D
from pace_nb.core.errors import MissingDataError, PaceNBError, UnknownNameError
from pace_nb.data.partition import louvain_communities


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PACE_NB_CACHE", str(d))
    D._load_cached.cache_clear()
    yield d
    D._load_cached.cache_clear()


def test_registry_names_case_insensitive_and_split_ratios():
    assert set(D.DATASETS) == {"Cora", "CiteSeer", "PubMed", "Computers", "Photo", "CS", "ogbn-arxiv",
                               "WikiCS", "Texas", "Cornell", "Wisconsin", "Actor", "demo"}
    assert D.canonical_name("citeseer") == "CiteSeer" and D.canonical_name(" OGBN-ARXIV ") == "ogbn-arxiv"
    assert D.get_spec("texas").folder == "texas"
    assert D.DATASETS["ogbn-arxiv"].ratios == (0.6, 0.2, 0.2)
    assert all(s.ratios == (0.2, 0.4, 0.4) for n, s in D.DATASETS.items() if n != "ogbn-arxiv")
    with pytest.raises(UnknownNameError, match="valid datasets: .*Cora.*demo"):
        D.load_dataset("Coraa")


def test_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("PACE_NB_DATA", str(tmp_path / "env"))
    assert D.data_root(tmp_path / "arg") == (tmp_path / "arg").resolve()
    assert D.data_root() == (tmp_path / "env").resolve()
    monkeypatch.delenv("PACE_NB_DATA")
    monkeypatch.chdir(tmp_path)
    assert D.data_root() == (tmp_path / "data").resolve()


def test_missing_raw_files_name_folder_and_files(tmp_path, tmp_cache):
    with pytest.raises(MissingDataError) as exc:
        D.load_dataset("cora", root=tmp_path)
    msg = str(exc.value)
    assert str(tmp_path / "Cora" / "raw") in msg and "ind.cora.x" in msg and "ind.cora.graph" in msg
    assert "PACE_NB_DATA" in msg and "\n" not in msg
    status = D.dataset_status(tmp_path).set_index("name")
    assert not status.loc["Cora", "present"] and status.loc["demo", "present"]
    assert "ind.cora.allx" in status.loc["Cora", "expected_files"]
    assert not (tmp_cache / "pyg").exists() or not any((tmp_cache / "pyg").rglob("processed"))


def test_cora_loads_raw_features_from_read_only_root(tmp_path, tmp_cache):
    require_dataset("Cora")
    ro = tmp_path / "ro"
    shutil.copytree(DATA_ROOT / "Cora", ro / "Cora")
    for p in [ro, ro / "Cora", ro / "Cora" / "raw"]:
        p.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        d = D.load_dataset("CORA", root=ro)
    finally:
        for p in [ro, ro / "Cora", ro / "Cora" / "raw"]:
            p.chmod(stat.S_IRWXU)
    assert sorted(os.listdir(ro / "Cora")) == ["raw"]          # nothing written beside the raw files
    assert not (DATA_ROOT / "Cora" / "processed").exists()
    assert not list(tmp_cache.rglob("processed"))               # PyG built in a private temp folder
    assert len(list((tmp_cache / "graphs").glob("Cora_*.npz"))) == 1  # the safe NPZ cache
    assert (d.name, d.num_nodes, d.edge_index.shape[1], d.x.shape[1], d.num_classes) == ("Cora", 2708, 10556, 1433, 7)
    assert d.x.dtype == torch.float32 and d.y.dtype == torch.long
    # raw bag-of-words: binary rows, not row-normalized
    assert set(torch.unique(d.x).tolist()) == {0.0, 1.0} and float(d.x.sum(1).max()) > 1
    assert is_undirected(d.edge_index) and not contains_self_loops(d.edge_index)
    assert D.load_dataset("cora", root=ro) is d                  # in-process cache


@pytest.mark.parametrize("name,n,c", [("Texas", 183, 5), ("Actor", 7600, 5)])
def test_webkb_and_actor_are_made_undirected(name, n, c):
    require_dataset(D.get_spec(name).folder)
    d = D.load_dataset(name)
    assert (d.num_nodes, d.num_classes) == (n, c) and d.name == name
    assert is_undirected(d.edge_index) and not contains_self_loops(d.edge_index)


def _write_csv_gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        for r in rows:
            fh.write(",".join(map(str, np.atleast_1d(r))) + "\n")


def test_synthetic_ogbn_arxiv_layout(tmp_path, tmp_cache):
    rng = np.random.default_rng(0)
    n, f = 40, 5
    x = rng.normal(size=(n, f)).round(4)
    y = rng.integers(0, 4, n)
    edges = np.array([[i, (i * 7 + 3) % n] for i in range(n) if (i * 7 + 3) % n != i])  # directed
    raw = tmp_path / "ogbn_arxiv" / "raw"
    _write_csv_gz(raw / "edge.csv.gz", edges)
    _write_csv_gz(raw / "node-feat.csv.gz", x)
    _write_csv_gz(raw / "node-label.csv.gz", y)
    _write_csv_gz(raw / "node_year.csv.gz", np.full(n, 2019))
    _write_csv_gz(raw / "num-node-list.csv.gz", [n])
    _write_csv_gz(raw / "num-edge-list.csv.gz", [len(edges)])
    for s, ids in zip(["train", "valid", "test"], np.split(np.arange(n), [24, 32])):
        _write_csv_gz(tmp_path / "ogbn_arxiv" / "split" / "time" / f"{s}.csv.gz", ids)
    assert D.dataset_status(tmp_path).set_index("name").loc["ogbn-arxiv", "present"]
    d = D.load_dataset("OGBN-arxiv", root=tmp_path)
    assert d.name == "ogbn-arxiv" and d.num_classes == int(y.max()) + 1
    np.testing.assert_allclose(d.x.numpy(), x.astype(np.float32))
    assert d.x.dtype == torch.float32 and torch.equal(d.y, torch.from_numpy(y))
    expect = {(int(a), int(b)) for a, b in edges} | {(int(b), int(a)) for a, b in edges}
    assert set(map(tuple, d.edge_index.t().tolist())) == expect
    assert not list(tmp_path.rglob("processed"))


def test_synthetic_wikics_layout(tmp_path, tmp_cache):
    rng = np.random.default_rng(1)
    n = 30
    links = [[int(j) for j in rng.choice(n, 2, replace=False) if j != i] for i in range(n)]
    masks = rng.random((20, n)) < 0.5
    payload = {"features": rng.normal(size=(n, 4)).round(3).tolist(), "labels": rng.integers(0, 3, n).tolist(),
               "links": links, "train_masks": masks.tolist(), "val_masks": (~masks).tolist(),
               "stopping_masks": masks.tolist(), "test_mask": [True] * n}
    (tmp_path / "WikiCS" / "raw").mkdir(parents=True)
    (tmp_path / "WikiCS" / "raw" / "data.json").write_text(json.dumps(payload))
    d = D.load_dataset("wikics", root=tmp_path)
    assert d.name == "WikiCS" and d.num_nodes == n and d.num_classes == 3
    np.testing.assert_allclose(d.x.numpy(), np.array(payload["features"], dtype=np.float32))
    expect = {(i, j) for i, js in enumerate(links) for j in js}
    expect |= {(j, i) for i, j in expect}
    assert set(map(tuple, d.edge_index.t().tolist())) == expect
    assert sorted(os.listdir(tmp_path / "WikiCS")) == ["raw"]


def test_demo_graph_properties():
    a, b = D.make_demo(0), D.make_demo(0)
    assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index) and torch.equal(a.y, b.y)
    other = D.make_demo(1)
    assert not torch.equal(a.edge_index, other.edge_index)
    assert 2000 <= a.num_nodes <= 3000 and a.num_classes >= 5 and a.name == "demo"
    assert torch.bincount(a.y).min() > 100                         # every class well represented
    assert is_undirected(a.edge_index) and not contains_self_loops(a.edge_index)
    assert set(torch.unique(a.x).tolist()) == {0.0, 1.0} and a.x.mean() < 0.05  # sparse binary
    # homophilous community structure that Louvain recovers
    src, dst = a.edge_index
    assert (a.y[src] == a.y[dst]).float().mean() > 0.6
    assert len(np.unique(louvain_communities(a.edge_index, a.num_nodes))) >= 10
    # class-correlated features: class-mean profiles differ more between than within classes
    means = torch.stack([a.x[a.y == c].mean(0) for c in range(a.num_classes)])
    cos = torch.nn.functional.normalize(means, dim=1) @ torch.nn.functional.normalize(means, dim=1).T
    assert float(cos[~torch.eye(a.num_classes, dtype=torch.bool)].max()) < 0.9
    assert D.load_dataset("DEMO") is D.load_dataset("demo")


def test_errors_are_pace_errors():
    assert issubclass(MissingDataError, PaceNBError) and issubclass(UnknownNameError, PaceNBError)
