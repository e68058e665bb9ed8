"""A user's own graph (NPZ, CSR NPZ, CSV folder), ``--partition given``, and every bad-file case."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pace_nb.cli import main
from pace_nb.core.errors import ConfigError
from pace_nb.data.datasets import load_dataset
from pace_nb.data.federation import build_federated
from pace_nb.data.userdata import load_graph, save_graph

from conftest import require_dataset


def _client_column(fg) -> np.ndarray:
    client = np.full(int(fg.data.num_nodes), -1, dtype=np.int64)
    for c in fg.clients:
        client[c.global_ids.numpy()] = c.index
    return client


@pytest.fixture(scope="module")
def demo_metis(tmp_path_factory):
    """The demo graph with its METIS split (K = 4) saved as a client column."""
    fg = build_federated("demo", "metis", 4, 2024)
    path = tmp_path_factory.mktemp("g") / "demo_metis.npz"
    save_graph(path, fg.data, _client_column(fg))
    return fg, path


def _same_clients(a, b) -> None:
    assert a.num_clients == b.num_clients
    for ca, cb in zip(a.clients, b.clients):
        for f in ("global_ids", "edge_index", "x", "y", "train_mask", "val_mask", "test_mask"):
            assert torch.equal(getattr(ca, f), getattr(cb, f)), f


def test_given_partition_equals_metis(demo_metis):
    fg, path = demo_metis
    given = build_federated(str(path), "given", seed=2024)
    assert given.config["scheme"] == "given" and given.dataset == "demo_metis"
    _same_clients(fg, given)
    other = build_federated(str(path), "given", seed=7)  # the data seed draws the masks
    assert not torch.equal(other.clients[0].train_mask, given.clients[0].train_mask)


def test_run_cli_given_equals_registered(demo_metis, tmp_path, capsys):
    _, path = demo_metis
    common = ["--seeds", "0", "--no-progress", "--device", "cpu"]
    assert main(["run", "--dataset", "demo", "--partition", "metis", "--clients", "4", *common,
                 "--json", str(tmp_path / "a.json")]) == 0
    assert main(["run", "--graph", str(path), "--partition", "given", *common, "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "4 given clients" in out and "edges kept inside clients" in out
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    cols = ("method", "variant", "seed", "receiver", "acc", "f1_weighted", "f1_macro", "alpha", "n_test")
    assert [[r[c] for c in cols] for r in a["receivers"]] == [[r[c] for c in cols] for r in b["receivers"]]
    assert [s["acc_mean"] for s in a["summary"]] == [s["acc_mean"] for s in b["summary"]]
    assert b["config"]["dataset"] == "demo_metis" and b["config"]["num_clients"] == 4
    assert set(b["config"]["graph_sha256"]) == {"demo_metis.npz"}


def test_formats_agree(tmp_path):
    """Dense NPZ, CSR NPZ and a CSV folder (header, any integer width, duplicates, self loops)
    give one graph: undirected, coalesced, self loops dropped — as a registered dataset."""
    rng = np.random.default_rng(0)
    n, f = 30, 5
    x = (rng.random((n, f)) < 0.3).astype(np.float32)
    y = np.arange(n) % 3
    src, dst = rng.integers(0, n, 80), rng.integers(0, n, 80)
    ei = np.stack([np.r_[src, src[:5], 3], np.r_[dst, dst[:5], 3]])  # duplicates + a self loop
    np.savez(tmp_path / "dense.npz", edge_index=ei.astype(np.uint16), x=x, y=y.astype(np.int8))
    import scipy.sparse as sp

    csr = sp.csr_matrix(x)
    np.savez(tmp_path / "csr.npz", edge_index=ei, y=y, x_data=csr.data, x_indices=csr.indices.astype(np.int16),
             x_indptr=csr.indptr, x_shape=np.array(csr.shape))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "edges.csv").write_text("# my edges\nsource,target\n" + "\n".join(f"{a},{b}" for a, b in ei.T))
    np.save(folder / "features.npy", x)
    (folder / "labels.csv").write_text("label\n" + "\n".join(map(str, y)))
    graphs = [load_graph(tmp_path / "dense.npz"), load_graph(tmp_path / "csr.npz"), load_graph(folder)]
    from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

    want = coalesce(to_undirected(remove_self_loops(torch.from_numpy(ei).long())[0], num_nodes=n), num_nodes=n)
    for g in graphs:
        assert torch.equal(g.edge_index, want) and torch.equal(g.x, torch.from_numpy(x))
        assert torch.equal(g.y, torch.from_numpy(y).long()) and g.num_classes == 3
    assert graphs[2].name == "folder"


def test_file_masks_and_clients_csv(tmp_path):
    fg = build_federated("demo", "louvain", 3, 2024)
    d = tmp_path / "silos"
    d.mkdir()
    data = fg.data
    ei = data.edge_index.numpy()
    (d / "edges.csv").write_text("\n".join(f"{a},{b}" for a, b in ei.T))
    np.savetxt(d / "features.csv", data.x.numpy(), delimiter=",", fmt="%g")
    np.savetxt(d / "labels.csv", data.y.numpy(), fmt="%d")
    np.savetxt(d / "clients.csv", _client_column(fg), fmt="%d")
    words = np.array(["train", "val", "test", "none"])[np.arange(int(data.num_nodes)) % 4]
    (d / "split.csv").write_text("\n".join(words))
    given = build_federated(str(d), "given", seed=2024)
    assert given.config["masks"] == "file"
    assert torch.equal(given.global_mask("train"), torch.from_numpy(words == "train"))
    assert torch.equal(given.global_mask("test"), torch.from_numpy(words == "test"))
    for a, b in zip(fg.clients, given.clients):
        assert torch.equal(a.global_ids, b.global_ids)


def test_graph_cache_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    path = tmp_path / "g.npz"
    ei = rng.integers(0, 20, (2, 40))
    np.savez(path, edge_index=ei, x=rng.random((20, 3)), y=np.arange(20) % 2)
    first = load_graph(path)
    entries = sorted((tmp_path / "cache" / "graphs").glob("*.npz"))
    assert len(entries) == 1
    np.savez(path, edge_index=ei, x=rng.random((20, 3)), y=np.arange(20) % 2)  # new content, same name
    second = load_graph(path)
    assert len(sorted((tmp_path / "cache" / "graphs").glob("*.npz"))) == 2
    assert not torch.equal(first.x, second.x)


def _npz(path, **over):
    rng = np.random.default_rng(2)
    base = dict(edge_index=rng.integers(0, 12, (2, 30)), x=rng.random((12, 4)), y=np.arange(12) % 3)
    base.update(over)
    np.savez(path, **{k: v for k, v in base.items() if v is not None})
    return path


BAD = {
    "edge_index shape": (dict(edge_index=np.zeros((3, 4), int)), "edge_index"),
    "edge id out of range": (dict(edge_index=np.array([[0, 12], [1, 2]])), "edge_index"),
    "negative id": (dict(edge_index=np.array([[0, -1], [1, 2]])), "edge_index"),
    "float ids": (dict(edge_index=np.array([[0.0, 1.5], [1.0, 2.0]])), "edge_index"),
    "no edges": (dict(edge_index=np.array([[1, 2], [1, 2]])), "edge_index"),
    "nan feature": (dict(x=np.where(np.eye(12, 4) > 0, np.nan, 1.0)), "x"),
    "float32 overflow": (dict(x=np.full((12, 4), 1e300)), "x"),
    "x 1-D": (dict(x=np.ones(12)), "x"),
    "empty graph": (dict(x=np.ones((0, 4)), y=np.zeros(0, int), edge_index=np.zeros((2, 0), int)), "x"),
    "label count": (dict(y=np.arange(11) % 3), "y"),
    "labels not 0..C-1": (dict(y=np.r_[np.arange(12)[:-2] % 3, 5, 5]), "y"),
    "class with one node": (dict(y=np.r_[np.zeros(11, int), 1]), "y"),
    "float labels": (dict(y=np.linspace(0, 2, 12)), "y"),
    "missing y": (dict(y=None), "y"),
    "unknown field": (dict(colour=np.ones(12)), "colour"),
    "one mask": (dict(train_mask=np.ones(12, bool)), "val_mask"),
    "overlapping masks": (dict(train_mask=np.ones(12, bool), val_mask=np.ones(12, bool), test_mask=np.zeros(12, bool)),
                          "val_mask"),
    "client gap": (dict(client=np.r_[np.zeros(6, int), np.full(6, 2)]), "client"),
    "pickled objects": (dict(client=np.array([object()] * 12)), "client"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_is_one_line_error(case, tmp_path, capsys):
    over, field = BAD[case]
    path = _npz(tmp_path / "bad.npz", **over)
    assert main(["partition", "--graph", str(path), "--scheme", "given" if "client" in over else "metis",
                 "--clients", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pace-nb: error:") and "\n" not in err and field in err, err


def test_client_without_training_nodes(tmp_path, capsys):
    # client 1 holds one node per class: the stratified 20 % cut gives it no training node
    y = np.r_[np.arange(30) % 3, 0, 1, 2]
    client = np.r_[np.zeros(30, int), 1, 1, 1]
    path = _npz(tmp_path / "g.npz", y=y, x=np.random.default_rng(0).random((33, 4)), client=client)
    assert main(["run", "--graph", str(path), "--partition", "given", "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert "client 1 has no training nodes" in err


def test_no_client_column(demo_metis):
    with pytest.raises(ConfigError, match="client column"):
        build_federated("demo", "given")


@pytest.mark.slow
def test_cora_given_equals_registered_metis(tmp_path):
    """Cora from its raw files with a METIS split saved as a client column: the same clients and
    masks as the registered dataset (the run's numbers follow, as the demo test checks)."""
    require_dataset("Cora")
    fg = build_federated("Cora", "metis", 10, 2024)
    path = tmp_path / "cora_metis.npz"
    save_graph(path, load_dataset("Cora"), _client_column(fg))
    given = build_federated(str(path), "given", seed=2024)
    _same_clients(fg, given)
    assert given.dataset == "cora_metis"


def test_grid_takes_a_graph_path(demo_metis, tmp_path):
    from pace_nb.experiments.grid import load_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.experiments.store import ResultsStore

    _, path = demo_metis
    (tmp_path / path.name).write_bytes(path.read_bytes())
    config = tmp_path / "mine.toml"
    config.write_text(f'[[experiment]]\ndatasets = ["{path.name}"]\npartitions = ["given", "metis"]\n'
                      f'clients = 4\nmethods = ["local"]\nseeds = [0]\ntrain = {{epochs = 5}}\n')
    store = ResultsStore(tmp_path / "store")
    report = run_grid(load_config(config), store, progress=False)
    assert report.count("ran") == 2
    rows = store.load()
    pooled = rows[rows.receiver == -1].set_index("partition")
    assert set(rows.dataset) == {"demo_metis"} and set(rows.num_clients) == {4}
    assert pooled.loc["given", "acc"] == pooled.loc["metis", "acc"]  # the file's clients are METIS's
    config.write_text('[[experiment]]\ndatasets = ["demo"]\npartitions = ["given"]\nmethods = ["local"]\n')
    with pytest.raises(ConfigError, match="client column"):
        run_grid(load_config(config), store, dry_run=True, progress=False)
