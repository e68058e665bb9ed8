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


# -- plugin methods: rows checked before any is stored; exceptions one line --------------------
PLUGIN = '''
"""A hostile method: its rows are one pooled row with ``column`` set to ``value`` (mode "ok"),
no rows ("empty"), or its run raises ("raise"); a Config with mode "bad-config" raises."""
from dataclasses import dataclass

import pandas as pd

from pace_nb.methods.contract import Method, register
from pace_nb.methods.evaluation import federation_fields, make_row


@register
class HostileProbe(Method):
    name = "hostileprobe"
    label = "HostileProbe"
    paper = "a hostile test method"
    colour, marker = "#999933", "v"
    needs = ()

    @dataclass(frozen=True)
    class Config:
        mode: str = "ok"
        column: str = "acc"
        value: float = 50.0

        def __post_init__(self):
            if self.mode == "bad-config":
                raise ValueError("mode bad-config is refused by the plugin")

    def run(self, fg, local, *, seeds=None, **kw):
        if self.cfg.mode == "empty":
            return pd.DataFrame()
        if self.cfg.mode == "raise":
            raise RuntimeError("the plugin's own bug")
        row = make_row(**federation_fields(fg), seed=seeds[0], run_seed=seeds[0], study="pace",
                       evaluation="receivers", method=self.name, variant="native", rank=0, receiver=-1,
                       acc=50.0, n_test=10, params={"mode": self.cfg.mode})
        row[self.cfg.column] = self.cfg.value
        return [row]
'''


@pytest.fixture
def hostile_plugin(tmp_path, monkeypatch):
    import importlib
    import sys

    from pace_nb.methods.registry import METHODS

    pkg = tmp_path / "hostilepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "probe.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("hostilepkg.probe")
    for mod in ("hostilepkg.probe", "hostilepkg"):
        sys.modules.pop(mod, None)
    METHODS._entries.pop("hostileprobe", None)  # the registry has no public unregister: tests only
    METHODS._lookup.pop("hostileprobe", None)


PROBE = ["run", "--clients", "3", "--seeds", "1", "--methods", "hostileprobe", "--device", "cpu", "--no-progress"]


def test_plugin_rows_in_range_are_kept(hostile_plugin, tmp_path, capsys):
    from pace_nb.cli import main

    assert main(PROBE + ["--param", "hostileprobe.value=75.5", "--json", str(tmp_path / "out.json")]) == 0
    assert "75.5" in (tmp_path / "out.json").read_text()


@pytest.mark.parametrize("column,value,what", [
    ("acc", "250", "acc = 250.0; it must be a percent in [0, 100]"),
    ("acc", "nan", "acc = nan; it must be a percent in [0, 100]"),
    ("f1_macro", "inf", "f1_macro = inf; it must be a percent in [0, 100]"),
    ("n_test", "-3", "n_test = -3.0; it must be an integer in [0, N]"),
    ("n_test", "1000000", "n_test = 1000000.0; it must be an integer in [0, N]"),
    ("n_test", "2.5", "n_test = 2.5"),
    ("bytes_up", "-1", "bytes_up = -1.0; it must be a non-negative integer"),
    ("alpha", "-inf", "alpha = -inf"),
    ("receiver", "7", "receiver = 7.0; it must be -1 (pooled) or a client 0..K-1"),
])
def test_plugin_rows_out_of_range_are_one_error(hostile_plugin, capsys, column, value, what):
    cli_error(PROBE + ["--param", f"hostileprobe.column={column!r}", "--param", f"hostileprobe.value={value}"],
              capsys, f"method 'hostileprobe' (module hostilepkg.probe): row 0 has {what}")


@pytest.mark.parametrize("mode,what", [
    ("empty", "method 'hostileprobe' (module hostilepkg.probe) returned no result rows"),
    ("raise", "method 'hostileprobe' (module hostilepkg.probe): its run raised RuntimeError: the plugin's own bug"),
    ("bad-config", "method 'hostileprobe' (module hostilepkg.probe): its Config raised ValueError: mode bad-config"),
])
def test_plugin_failure_is_one_line_naming_method_and_module(hostile_plugin, capsys, mode, what):
    cli_error(PROBE + ["--param", f"hostileprobe.mode={mode!r}"], capsys, what)


def test_plugin_with_no_rows_commits_no_cell_and_a_rerun_computes_it(hostile_plugin, tmp_path, capsys):
    """An empty frame used to commit the cell as done with Local's rows only; no rerun recomputed it."""
    from pace_nb.cli import main
    from pace_nb.experiments.store import ResultsStore

    grid, store = tmp_path / "g.toml", tmp_path / "store"
    body = ('[[experiment]]\ndatasets = ["demo"]\nclients = 3\nmethods = ["local", "hostileprobe"]\nseeds = [1]\n'
            'train = { epochs = 2 }\nmethod_params = { hostileprobe = { mode = "%s" } }\n')
    grid.write_text(body % "empty")
    cli_error(["grid", str(grid), "--results", str(store)], capsys, "returned no result rows")
    assert ResultsStore(store).keys() == []
    grid.write_text(body % "ok")
    assert main(["grid", str(grid), "--results", str(store)]) == 0
    rows = ResultsStore(store).load()
    assert set(rows.method) == {"local", "hostileprobe"}
