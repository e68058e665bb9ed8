"""Trust no byte (issue 41): a user's own graph files, plugin methods' rows, ``flower deploy``'s
work folder and the last tracebacks. Each case is one ``pace-nb: error:`` line (or a clean
recovery), never silently wrong numbers, a committed bad cell or a deleted user file.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from hostile_helpers import cli_error
from synthetic import forget_temp_module, import_temp_module

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

from pace_nb.core.validation import Interval, Is
from pace_nb.core.validation import param
from pace_nb.methods.contract import Method, register
from pace_nb.methods.evaluation import federation_fields, make_row


@register
class HostileProbe(Method):
    name = "hostileprobe"
    label = "HostileProbe"
    paper = "a hostile test method"
    colour, marker = "#999933", "v"
    needs = ()
    evaluation = "receivers"

    @dataclass(frozen=True)
    class Config:
        mode: str = param("ok", Is(str))
        column: str = param("acc", Is(str))
        value: float = param(50.0, Is((int, float)))

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
    yield import_temp_module(tmp_path, monkeypatch, "hostilepkg", "probe", PLUGIN)
    forget_temp_module("hostilepkg", "probe", "hostileprobe")


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


# -- the last tracebacks: a full disk, a killed writer, a damaged run stamp, a non-literal parameter
def test_full_disk_while_storing_a_cell_is_one_error_and_keeps_the_store(tmp_path, capsys, monkeypatch):
    import errno
    import os

    from fake_results import make_rows
    from pace_nb.cli import main
    from pace_nb.core import io as core_io
    from pace_nb.experiments import store as S
    from pace_nb.experiments.store import ResultsStore

    store = ResultsStore(tmp_path / "store")
    store.append(make_rows(), cell_key="earlier")
    before = (store.cells_dir / "earlier.csv").read_bytes()

    def full_disk(path, data):  # the disk fills half-way through the file
        def write(fh):
            fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return core_io._atomic(path, write)

    monkeypatch.setattr(S, "atomic_write_bytes", full_disk)
    grid = tmp_path / "g.toml"
    grid.write_text('[[experiment]]\ndatasets = ["demo"]\nclients = 3\nmethods = ["local"]\nseeds = [1]\n'
                    'train = { epochs = 2 }\n')
    cli_error(["grid", str(grid), "--results", str(store.root)], capsys, "No space left on device; nothing was replaced")
    assert store.keys() == ["earlier"] and (store.cells_dir / "earlier.csv").read_bytes() == before
    assert not [p.name for p in store.cells_dir.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert main(["grid", str(grid), "--results", str(store.root)]) == 0 and len(store.keys()) == 2


KILLED_WRITER = """
import os, signal, sys
from pace_nb.core.io import _atomic

def write(fh):
    fh.write(b"half a file")
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)

_atomic(sys.argv[1], write)
"""


def test_a_killed_writer_leaves_no_temp_file_behind(tmp_path):
    """SIGKILL between creating the temporary file and renaming it: the next write removes it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from pace_nb.core.io import STALE_SECONDS, _host, atomic_write_text

    folder = tmp_path / "cells"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(folder / "a.csv")], env=env)
    assert proc.returncode == -signal.SIGKILL
    left = [p.name for p in folder.iterdir()]
    assert len(left) == 1 and left[0].startswith(".a.csv.") and left[0].endswith(".tmp")
    alive = folder / f".b.csv.{_host()}-{os.getpid()}-abcd1234.tmp"        # a writer still at work
    other_host = folder / ".c.csv.000000-1-abcd1234.tmp"                  # another host's, fresh
    old_other = folder / ".d.csv.000000-1-abcd1234.tmp"                   # another host's, abandoned
    old_naming = folder / ".e.csv.x1y2z3w4.tmp"                           # before writers were recorded
    for p in (alive, other_host, old_other, old_naming):
        p.write_text("partial")
    long_ago = time.time() - STALE_SECONDS - 60
    for p in (old_other, old_naming):
        os.utime(p, (long_ago, long_ago))
    (folder / ".notes.tmp").write_text("a user's file, not of our naming")
    atomic_write_text(folder / "b.json", "{}")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["b.json", alive.name, other_host.name, ".notes.tmp"])


def _stamped_notebook(folder, source: str = 'dataset = "demo"\nfigures_dir = ""\n'):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    cell = new_code_cell(source)
    cell.metadata["tags"] = ["parameters"]
    folder.mkdir(exist_ok=True)
    nbformat.write(new_notebook(cells=[cell]), folder / "01_probe.ipynb")
    return folder


@pytest.mark.parametrize("damage", ["truncated", "a list", "key not a string"])
def test_damaged_run_stamp_runs_the_notebook_again(tmp_path, monkeypatch, damage):
    import pace_nb.notebooks as nbr

    ran = []

    def execute(path, output, *a, **k):  # what papermill leaves: the executed copy
        ran.append(path)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("{}")

    monkeypatch.setattr(nbr, "execute_notebook", execute)
    books = _stamped_notebook(tmp_path / "nb")
    kw = dict(notebooks_dir=books, figures_dir=tmp_path / "figs", build_dir=tmp_path / "build")
    assert [r.status for r in nbr.run_notebooks(**kw)] == ["executed"]
    assert [r.status for r in nbr.run_notebooks(**kw)] == ["skipped"]
    stamp = tmp_path / "build" / "01_probe__demo.json"
    text = stamp.read_text()
    stamp.write_text({"truncated": text[: len(text) // 2], "a list": "[1, 2]",
                      "key not a string": '{"key": [1], "figures": []}'}[damage])
    assert [r.status for r in nbr.run_notebooks(**kw)] == ["executed"] and len(ran) == 2
    assert [r.status for r in nbr.run_notebooks(**kw)] == ["skipped"]   # the stamp was written anew


@pytest.mark.parametrize("source,what", [
    ('dataset = "demo"\nfigures_dir = ""\nrounds = 2 * 50\n', "parameter 'rounds' = 2 * 50 is not a literal"),
    ('dataset = "demo"\nfigures_dir = ""\nseeds = list(range(3))\n', "parameter 'seeds' = list(range(3)) is not a literal"),
    ('dataset = "demo"\nfigures_dir = (\n', "its parameters cell is not valid Python"),
])
def test_non_literal_notebook_parameter_is_one_error(tmp_path, monkeypatch, source, what):
    import pace_nb.notebooks as nbr
    from pace_nb.core.errors import ConfigError

    monkeypatch.setattr(nbr, "execute_notebook", lambda *a, **k: pytest.fail("executed a notebook it cannot parameterize"))
    books = _stamped_notebook(tmp_path / "nb", source)
    with pytest.raises(ConfigError, match=f"01_probe.ipynb: {re.escape(what)}"):
        nbr.run_notebooks(notebooks_dir=books, figures_dir=tmp_path / "figs", build_dir=tmp_path / "build")


# -- flower deploy --workdir: removes only what it wrote ----------------------------------------
@pytest.mark.parametrize("given", ["empty folder", "new path"])
def test_deploy_cleanup_keeps_files_a_user_adds_during_the_run(tmp_path, given):
    """A fake run: the deployment's own entries, and a user's file added while it runs."""
    from pace_nb.flower.deploy import clean_workdir, prepare_workdir

    workdir = tmp_path / "work"
    if given == "empty folder":
        workdir.mkdir()
    root, created = prepare_workdir(workdir)
    assert created == (given == "new path")
    for name in ("logs", "flwr_home", "outcome.json", "export", "app", "credentials", "node_0", "node_1"):  # deploy()'s
        if "." in name:
            (root / name).write_text("{}")
        else:
            (root / name / "sub").mkdir(parents=True)
            (root / name / "sub" / "f.log").write_text("x")
    (root / "thesis.tex").write_text("precious")   # the user's, added during the run
    (root / "notes").mkdir()
    clean_workdir(root, created)
    assert sorted(p.name for p in root.iterdir()) == ["notes", "thesis.tex"]
    assert (root / "thesis.tex").read_text() == "precious"
    (root / "thesis.tex").unlink()
    (root / "notes").rmdir()
    clean_workdir(root, created)                    # nothing of the user's left: a folder it created goes
    assert root.exists() == (given == "empty folder")
