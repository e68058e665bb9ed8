"""Provenance of stored cells (pace_nb.experiments.provenance): written by the grid, listed by the report."""
from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.experiments import provenance as pv
from pace_nb.experiments.store import ResultsStore


def test_a_new_cell_manifest_records_every_provenance_field(tmp_path):
    import numpy
    import torch

    from pace_nb import __version__
    from pace_nb.experiments.grid import parse_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.methods.registry import METHODS

    store = ResultsStore(tmp_path / "store")
    cfg = parse_config('[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n')
    runner = lambda cell: make_rows(dataset=cell.dataset, seeds=cell.seeds, receivers=False,
                                    methods={("local", "native", 0): 0.0})
    rep = run_grid(cfg, store=store, runner=runner, known_methods=METHODS, progress=False, device="cpu")
    rec = store.manifest(rep.records[0]["key"])["provenance"]
    assert set(pv.FIELDS) <= set(rec)
    assert rec["package_version"] == __version__ and rec["torch"] == torch.__version__
    assert rec["numpy"] == numpy.__version__ and rec["device"] == "cpu" and rec["threads"] == torch.get_num_threads()
    assert isinstance(rec["cpus"], int) and rec["cpus"] >= 1
    assert isinstance(rec["memory_gbps"], float) and rec["memory_gbps"] > 0  # measured before the first cell
    from pace_nb.core.config import repo_root

    commit, dirty = pv.git_state(repo_root())
    assert rec["git_commit"] == commit and rec["git_dirty"] == dirty
    assert store.cells()["provenance"].iloc[0] == rec


def test_git_state_of_a_checkout_and_outside_one(tmp_path):
    assert pv.git_state(None) == (None, None)
    assert pv.git_state(tmp_path / "not-a-repo") == (None, None)
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)
    git("init", "-q")
    (repo / "f.txt").write_text("a", encoding="utf-8")
    git("add", "f.txt")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert pv.git_state.__wrapped__(repo) == (head, False)
    (repo / "f.txt").write_text("b", encoding="utf-8")  # a tracked change: dirty
    assert pv.git_state.__wrapped__(repo) == (head, True)


def test_report_lists_commits_and_old_cells_as_not_recorded():
    from pace_nb.analysis.report import commit_table

    rec = {"git_commit": "a" * 40, "git_dirty": True, "device": "cpu", "threads": 1, "torch": "2", "torch_geometric": "2.8",
           "numpy": "2.4"}
    cells = pd.DataFrame({"key": ["x", "y", "z"], "provenance": [rec, None, {**rec, "git_dirty": False}]})
    assert commit_table(cells) == [("`aaaaaaaaaaaa`", 1, "cpu · 1", "2 · 2.8 · 2.4", "–"),
                                   ("`aaaaaaaaaaaa (dirty)`", 1, "cpu · 1", "2 · 2.8 · 2.4", "–"),
                                   ("not recorded", 1, "–", "–", "–")]
    fast, slow = {**rec, "git_dirty": False, "memory_gbps": 27.8}, {**rec, "git_dirty": False, "memory_gbps": 12.4}
    cells = pd.DataFrame({"key": ["x", "y", "z"], "provenance": [fast, slow, {**rec, "git_dirty": False}]})
    assert commit_table(cells) == [("`aaaaaaaaaaaa`", 3, "cpu · 1", "2 · 2.8 · 2.4", "12.4–27.8 GB/s")]
    assert pv.commit_label(None) == pv.NOT_RECORDED and pv.commit_label({"git_commit": None}) == "no git checkout"


def test_machines_are_read_from_the_manifests():
    new = {"device": "cuda:0", "threads": 4, "cpus": 16}
    old = {"device": "cpu", "threads": 1}  # recorded before the CPU count was
    assert pv.machine_label(new) == "cuda:0 (16 CPUs), 4 threads"
    assert pv.machine_label(old) == "cpu, 1 thread" and pv.machine_label(None) == pv.NOT_RECORDED
    assert pv.machines([old, None, new, old, {}]) == \
        "cpu, 1 thread (2 cells); cuda:0 (16 CPUs), 4 threads (1 cell); not recorded (2 cells)"
    assert pv.machines([]) == "no cells"


def test_bandwidths_name_the_range_and_the_cells_without_one():
    assert pv.bandwidths([{"memory_gbps": 12.4}, None, {"memory_gbps": 27.8}, {"device": "cpu"}]) == \
        "12.4–27.8 GB/s (2 cells); not recorded (2 cells)"
    assert pv.bandwidths(iter([{"memory_gbps": 12.4}])) == "12.4 GB/s (1 cell)"
    assert pv.bandwidths([None, {"memory_gbps": None}]) == pv.NOT_RECORDED


def test_triad_bandwidth_is_bytes_moved_over_the_fastest_pass(monkeypatch):
    """12 bytes per element (read b and c, write a) over the best of the passes' CPU times."""
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.4])  # passes of 0.5, 0.25 and 0.4 s
    monkeypatch.setattr(pv.time, "process_time", lambda: next(clock))
    assert pv.triad_bandwidth(n=1000, reps=3) == pytest.approx(12 * 1000 / 0.25)


def test_memory_bandwidth_is_measured_once_on_one_thread():
    import torch

    threads = torch.get_num_threads()
    first = pv.memory_bandwidth()
    assert first is not None and first > 0 and pv.memory_bandwidth() is first  # cached for the process
    assert torch.get_num_threads() == threads  # the thread setting is restored
