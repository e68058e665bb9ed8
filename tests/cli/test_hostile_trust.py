"""Trust no byte (issue 41): a user's own graph files, plugin methods' rows, ``flower deploy``'s
work folder and the last tracebacks. Each case is one ``pace-nb: error:`` line (or a clean
recovery), never silently wrong numbers, a committed bad cell or a deleted user file.
"""
from __future__ import annotations

import numpy as np
import pytest

from hostile_helpers import cli_error

N = 30  # nodes of the small own-data graph


@pytest.fixture(autouse=True)
def private_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PACE_NB_RESULTS", str(tmp_path / "results"))


# -- own-data readers: a header names every column; ids bounded before any allocation ---------
def graph_folder(root, *, edges=None, features=None, labels=None, clients=None):
    """A CSV graph folder (a ring with chords, 3 classes); each file's text may be replaced."""
    root.mkdir()
    ring = [(i, (i + 1) % N) for i in range(N)] + [(i, (i + 7) % N) for i in range(0, N, 3)]
    (root / "edges.csv").write_text(edges or "source,target\n" + "\n".join(f"{a},{b}" for a, b in ring) + "\n")
    x = np.random.default_rng(0).random((N, 4))
    (root / "features.csv").write_text(features or "\n".join(",".join(f"{v:.3f}" for v in r) for r in x) + "\n")
    (root / "labels.csv").write_text(labels or "label\n" + "\n".join(str(i % 3) for i in range(N)) + "\n")
    if clients is not None:
        (root / "clients.csv").write_text(clients)
    return root


def test_graph_folder_reads(tmp_path):
    from pace_nb.data.userdata import load_graph

    g = load_graph(graph_folder(tmp_path / "g"), cache=False)
    assert (g.num_nodes, g.num_features, g.num_classes) == (N, 4, 3)


def test_edges_header_narrower_than_rows_is_an_error(tmp_path, capsys):
    """``source,target`` over rows ``s,t,7``: pandas took column 1 as the index and kept (t, 7)."""
    rows = "\n".join(f"{i},{(i + 1) % N},7" for i in range(N))
    folder = graph_folder(tmp_path / "g", edges=f"source,target\n{rows}\n")
    cli_error(["partition", "--graph", str(folder), "--clients", "2", "--no-cache"], capsys,
              "edges.csv: edges: the header names 2 column(s) but the rows hold 3")


def test_features_header_one_name_short_is_an_error(tmp_path, capsys):
    """599 names over 600 columns: feature 0 was silently taken as the index and lost."""
    f = 600
    x = np.random.default_rng(1).integers(0, 2, (N, f))
    text = ",".join(f"w{j}" for j in range(1, f)) + "\n" + "\n".join(",".join(map(str, r)) for r in x) + "\n"
    folder = graph_folder(tmp_path / "g", features=text)
    cli_error(["partition", "--graph", str(folder), "--clients", "2", "--no-cache"], capsys,
              "features.csv: features: the header names 599 column(s) but the rows hold 600")


@pytest.mark.parametrize("which", ["labels", "clients"])
def test_huge_ids_are_one_error_before_allocating(tmp_path, capsys, which):
    """A label or client id of 10^12 was handed to np.bincount (a MemoryError traceback)."""
    ids = [str(i % 3) for i in range(N)]
    ids[5] = str(10**12)
    text = "\n".join(ids) + "\n"
    folder = graph_folder(tmp_path / "g", **{which: text})
    scheme = ["--scheme", "given"] if which == "clients" else ["--clients", "2"]
    cli_error(["partition", "--graph", str(folder), "--no-cache", *scheme], capsys,
              f"holds ids in [0, {10**12}], outside [0, {N - 1}]")


@pytest.mark.parametrize("field", ["y", "client"])
def test_huge_ids_in_an_npz_are_one_error(tmp_path, capsys, field):
    ids = np.arange(N) % 3
    ids[0] = 10**12
    ring = np.stack([np.arange(N), (np.arange(N) + 1) % N])
    np.savez(tmp_path / "g.npz", edge_index=ring, x=np.ones((N, 2)),
             **({"y": ids} if field == "y" else {"y": np.arange(N) % 3, "client": ids}))
    cli_error(["partition", "--graph", str(tmp_path / "g.npz"), "--no-cache", "--scheme", "given"], capsys,
              f"{field}: holds ids in [0, {10**12}]")
