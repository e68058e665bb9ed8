"""OpenFGL's split semantics beside ours, and the reader of its split caches (never unpickles)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from pace_nb.core.errors import DataCorruptionError
from pace_nb.data.federation import build_federated
from pace_nb.data.openfgl import SPLITS, client_split, openfgl_split, per_class_sizes, read_id_list


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_read_id_list_reads_a_pickled_list_of_ints(tmp_path, protocol):
    ids = [0, 7, 255, 256, 65_535, 70_000, 2**31 + 5]
    path = tmp_path / "glb_train_0.pkl"
    path.write_bytes(pickle.dumps(ids, protocol=protocol))
    assert read_id_list(path) == ids


def test_read_id_list_refuses_anything_but_ints(tmp_path):
    for i, obj in enumerate(({"a": 1}, [1, "x"], [1.5], np.arange(3))):
        path = tmp_path / f"bad{i}.pkl"
        path.write_bytes(pickle.dumps(obj))
        with pytest.raises(DataCorruptionError, match="unexpected pickle opcode"):
            read_id_list(path)
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(DataCorruptionError):
        read_id_list(junk)


@pytest.mark.parametrize("scheme, k", [("louvain", 3), ("metis", 4), ("dirichlet", 3)])
def test_our_masks_have_openfgls_per_class_sizes(scheme, k):
    """Our stratified 20/40/40 masks and OpenFGL's split code (an independent re-implementation of
    its ``int(0.2 n)`` / ``int(0.6 n)`` cuts per class) give every client the same per-class sizes;
    the draws themselves differ (OpenFGL's is unseeded)."""
    fg = build_federated("demo", scheme, k, 2024, **({"beta": 0.5} if scheme == "dirichlet" else {}))
    y = fg.data.y.view(-1).numpy()
    rs = np.random.RandomState(0)
    for c in fg.clients:
        nodes = c.global_ids.numpy()
        theirs = openfgl_split(nodes, y, rs)
        ours = client_split(c)
        assert per_class_sizes(ours, y, fg.num_classes) == per_class_sizes(theirs, y, fg.num_classes)
        assert sorted(np.concatenate([theirs[s] for s in SPLITS]).tolist()) == sorted(nodes.tolist())
        assert not set(theirs["train"]) & set(theirs["test"])


def test_openfgl_split_is_a_function_of_the_generator_state():
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    nodes = np.arange(15)
    a, b = (openfgl_split(nodes, y, np.random.RandomState(5)) for _ in range(2))
    assert a == b and [len(a[s]) for s in SPLITS] == [1 + 2, 2 + 4, 2 + 4]  # int(0.2·5)+int(0.2·10), …


def test_graph_facts_and_lonely_nodes_against_plain_python():
    """The probe's counts (benchmarks/citeseer_probe.py) beside a loop over the edge list."""
    import torch
    from torch_geometric.data import Data

    from pace_nb.data.checks import graph_facts, lonely_nodes

    ei = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 3]])
    x = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0], [0.0, 0.0], [1.0, 1.0]])
    facts = graph_facts(Data(x=x, edge_index=ei, num_nodes=5))
    assert facts == {"nodes": 5, "edges": 3, "isolated": 1, "zero_feature_rows": 2, "self_loops": 2}
    fg = build_federated("demo", "louvain", 4, 2024)
    got = lonely_nodes(fg)
    want = torch.zeros_like(got)
    for c in fg.clients:
        has = {int(a) for a, b in c.edge_index.t().tolist() if a != b}
        for local in range(c.num_nodes):
            if local not in has:
                want[c.global_ids[local]] = True
    assert torch.equal(got, want)
