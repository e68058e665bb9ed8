"""FederatedGraph building: induced subgraphs, stratified masks, seeding, on-disk cache."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch_geometric.utils import subgraph

from pace_nb.data import federation as F
from pace_nb.data.datasets import make_demo
from pace_nb.core.errors import ConfigError


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    F._build_named.cache_clear()
    yield tmp_path / "cache"
    F._build_named.cache_clear()


def test_stratified_masks_counts_per_class():
    y = np.repeat(np.arange(4), [1, 5, 10, 23])
    tr, va, te = F.stratified_masks(y, np.random.default_rng(0))
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert bool((tr | va | te).all())
    for c, n in enumerate([1, 5, 10, 23]):
        sel = torch.from_numpy(y == c)
        assert int(tr[sel].sum()) == math.floor(0.2 * n)
        assert int(va[sel].sum()) == math.floor(0.6 * n) - math.floor(0.2 * n)
    tr2, _, _ = F.stratified_masks(y, np.random.default_rng(0), ratios=(0.6, 0.2, 0.2))
    assert int(tr2.sum()) == sum(math.floor(0.6 * n) for n in [1, 5, 10, 23])
    with pytest.raises(ConfigError, match="summing to 1"):
        F.stratified_masks(y, np.random.default_rng(0), ratios=(0.5, 0.5, 0.5))


def test_build_federated_demo_structure(tmp_cache):
    fg = F.build_federated("demo", "louvain", 10, seed=2024)
    data = fg.data
    assert fg.dataset == "demo" and fg.num_clients == 10 and fg.num_classes == data.num_classes
    assert fg.num_features == data.x.shape[1]
    ids = torch.cat([c.global_ids for c in fg.clients])
    assert torch.equal(ids.sort().values, torch.arange(data.num_nodes))
    edges = set(map(tuple, data.edge_index.t().tolist()))
    for c in fg.clients:
        g = c.global_ids
        assert torch.all(g[1:] > g[:-1])
        assert torch.equal(c.x, data.x[g]) and torch.equal(c.y, data.y[g])
        # induced subgraph, computed independently: every global edge with both ends inside
        inside = set(g.tolist())
        expect = {(a, b) for a, b in edges if a in inside and b in inside}
        got = {(int(g[a]), int(g[b])) for a, b in c.edge_index.t().tolist()}
        assert got == expect and c.edge_index.shape[1] == len(expect)
        masks = torch.stack([c.train_mask, c.val_mask, c.test_mask])
        assert torch.equal(masks.sum(0), torch.ones(c.num_nodes, dtype=torch.long))
        # … and exactly PyG's relabelled subgraph, edge order included
        assert torch.equal(c.edge_index, subgraph(g, data.edge_index, relabel_nodes=True,
                                                  num_nodes=data.num_nodes)[0])
    cfg = fg.config
    assert (cfg["dataset"], cfg["scheme"], cfg["num_clients"], cfg["seed"], cfg["resolution"], cfg["delta"],
            cfg["beta"], cfg["ratios"]) == ("demo", "louvain", 10, 2024, 1.0, 20, None, [0.2, 0.4, 0.4])
    union = fg.global_mask("train") | fg.global_mask("val") | fg.global_mask("test")
    assert bool(union.all())


def test_masks_seeded_by_data_seed(tmp_cache):
    a = F.build_federated("demo", "louvain", 5, seed=7, cache=False)
    b = F.build_federated("demo", "louvain", 5, seed=7, cache=False)
    c = F.build_federated("demo", "louvain", 5, seed=8, cache=False)
    for x, y in zip(a.clients, b.clients):
        for name in ("global_ids", "edge_index", "train_mask", "val_mask", "test_mask"):
            assert torch.equal(getattr(x, name), getattr(y, name))
    # Louvain is seed-free, so the clients agree; the masks must not
    assert all(torch.equal(x.global_ids, y.global_ids) for x, y in zip(a.clients, c.clients))
    assert not all(torch.equal(x.train_mask, y.train_mask) for x, y in zip(a.clients, c.clients))


def test_build_federated_accepts_data_and_in_process_cache(tmp_cache):
    first = F.build_federated("demo", "metis", 4)
    assert F.build_federated("DEMO", "metis", 4) is first
    d = make_demo(3)
    fg = F.build_federated(d, "dirichlet", 4, seed=1, beta=0.5, cache=False)
    assert fg.dataset == "demo" and fg.config["beta"] == 0.5 and fg.num_clients == 4
    assert fg.config["resolution"] is None and fg.config["delta"] is None  # Louvain-only parameters


def test_dirichlet_requires_beta_and_beta_only_for_dirichlet(tmp_cache):
    with pytest.raises(ConfigError, match="needs a concentration beta"):
        F.build_federated("demo", "dirichlet", 5)
    with pytest.raises(ConfigError, match="only applies to the dirichlet"):
        F.build_federated("demo", "louvain", 5, beta=0.5)


def test_disk_cache_roundtrip_and_rebuild_when_corrupted(tmp_cache):
    fresh = F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3, cache=False)
    F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3)           # writes the cache
    npz = list((tmp_cache / "partitions").glob("demo_dirichlet_K6_s5_*.npz"))
    meta = list((tmp_cache / "partitions").glob("demo_dirichlet_K6_s5_*.json"))
    assert len(npz) == 1 and len(meta) == 1
    info = json.loads(meta[0].read_text())
    assert len(info["sha256"]) == 64 and info["config"]["beta"] == 0.3

    def same(fg):
        return all(torch.equal(getattr(x, n), getattr(y, n)) for x, y in zip(fresh.clients, fg.clients)
                   for n in ("global_ids", "edge_index", "train_mask", "val_mask", "test_mask"))

    F._build_named.cache_clear()
    assert same(F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3))   # read back, no warning

    # tamper with the contents (valid NPZ, wrong data) → checksum mismatch → warning + rebuild
    with np.load(npz[0]) as z:
        arrays = {k: z[k].copy() for k in z.files}
    arrays["split"][:10] = 0
    np.savez(npz[0], **arrays)
    F._build_named.cache_clear()
    with pytest.warns(RuntimeWarning, match="corrupted or mismatched"):
        assert same(F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3))
    # truncated garbage file
    npz[0].write_bytes(b"not a zip")
    F._build_named.cache_clear()
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        assert same(F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3))
    # mismatched metadata
    info = json.loads(meta[0].read_text())
    info["config"]["seed"] = 99
    meta[0].write_text(json.dumps(info))
    F._build_named.cache_clear()
    with pytest.warns(RuntimeWarning, match="does not match"):
        assert same(F.build_federated("demo", "dirichlet", 6, seed=5, beta=0.3))


def test_cache_key_separates_parameters(tmp_cache):
    F.build_federated("demo", "louvain", 5, seed=1)
    F.build_federated("demo", "louvain", 5, seed=1, delta=10)
    F.build_federated("demo", "louvain", 5, seed=1, ratios=(0.6, 0.2, 0.2))
    assert len(list((tmp_cache / "partitions").glob("*.npz"))) == 3


def test_to_json_dict_and_summary(tmp_cache):
    fg = F.build_federated("demo", "louvain", 4, seed=2024)
    j = json.loads(json.dumps(fg.to_json_dict()))
    assert set(j) == {"clients", "masks", "config"} and set(j["masks"]) == {"train", "val", "test"}
    for k, c in enumerate(fg.clients):
        assert j["clients"][k] == c.global_ids.tolist()
        assert j["masks"]["test"][k] == c.global_ids[c.test_mask].tolist()
    table = fg.summary()
    assert list(table["nodes"]) == [c.num_nodes for c in fg.clients]
    assert (table["train"] + table["val"] + table["test"] == table["nodes"]).all()
    assert list(table["edges"]) == [c.edge_index.shape[1] // 2 for c in fg.clients]
