"""REPRODUCTION.md (`pace-nb report`), the shipped results store and the reading order of stores."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.analysis import report, store_readme
from pace_nb.analysis.paper_values import paper_values
from pace_nb.core import config
from pace_nb.core.errors import ConfigError
from pace_nb.experiments.store import ResultsStore, load_results

ROOT = Path(__file__).resolve().parents[2]


def _table1_rows(offsets: dict[tuple[str, str], float]) -> pd.DataFrame:
    """Cora K = 10 Local + PACE rows whose seed means are the paper's Table 1 value + offset."""
    paper = paper_values("pace", table="1").set_index(["dataset", "method", "metric"])["value"]
    rows = make_rows(dataset="Cora", num_clients=10, receivers=False,
                     methods={("local", "native", 0): 0.0, ("pace", "full", 6): 0.0})
    for (method, metric), off in offsets.items():
        sel = rows["method"] == method
        rows.loc[sel, metric] = paper[("Cora", method, metric)] + off + 0.1 * (rows.loc[sel, "seed"] - 3)
    return rows


OFFSETS = {("local", "acc"): 0.5, ("local", "f1_weighted"): -1.5, ("pace", "acc"): 3.0, ("pace", "f1_weighted"): -6.0}


def test_agreement_shares_by_hand():
    comp = pd.DataFrame({"metric": ["acc", "acc", "f1_weighted", "f1_macro", "acc", "alpha_mean", "acc"],
                         "method": ["local", "pace", "fedavg", "pace", "pace", "pace", "local"],
                         "paper_mean": [70.0, 70.0, 70.0, 70.0, 70.0, 0.5, float("nan")],
                         "diff": [0.5, -1.5, 3.0, 6.0, float("nan"), 9.0, 0.0],
                         "status": ["ok", "ok", "ok", "ok", "not run", "ok", "ok"]})
    a = report.agreement(comp)  # scored: the five point entries with a paper value; run: four of them
    assert (a["scored"], a["run"]) == (5, 4)
    assert (a["within_1"], a["within_2"], a["within_5"]) == (0.25, 0.5, 0.75)
    lp = report.agreement(comp, ("local", "pace"))  # 0.5, -1.5, 6.0 (FedAvg's 3.0 left out)
    assert (lp["run"], lp["within_1"], lp["within_2"], lp["within_5"]) == (3, 1 / 3, 2 / 3, 2 / 3)
    assert report.agreement(comp.iloc[4:5])["within_1"] is None


def test_report_from_fake_store(tmp_path):
    store = ResultsStore(tmp_path / "store")
    store.append(_table1_rows(OFFSETS), cell_key="k1", cell={"kind": "protocol", "dataset": "Cora"}, seconds=12.34)
    configs = {"cfg": [{"key": "k1", "dataset": "Cora"}, {"key": "k2", "dataset": "PubMed"}]}
    text = report.build_report(store.load(), store.cells(), configs, store_label="store/", tables=["1", "2"])
    # Table 1, Cora: Local +0.5 / -1.5, PACE +3.0 / -6.0 → within 1: 1/4, 2: 2/4, 5: 3/4
    assert "| 1 | 120 | 4 | 25% | 50% | 75% | 25% of 4 |" in text
    assert "| 2 | 21 | 2 | 50% | 50% | 100% | 50% of 2 |" in text  # Table 2, Cora: Local +0.5, Full PACE +3.0
    # both tables together (6 entries: 1, 2, 3 of them within 1, 2, 5 points; Local/PACE: all 6)
    assert "| **PACE 1–12** | 141 | 6 | 33% | 50% | 83% | 33% of 6 |" in text
    assert "| `cfg` | 1 / 2 | 12 | PubMed |" in text
    far = [ln for ln in text.splitlines() if ln.startswith("| 1 | PACE")]
    assert len(far) == 2 and "+3.00" in far[0] and "-6.00" in far[1]
    assert "not run" in text and "store/" in text
    assert text == report.build_report(store.load(), store.cells(), configs, store_label="store/", tables=["1", "2"])
    readme = store_readme.store_readme(store.cells(), configs, store_label="store/")
    assert "| `cfg` | 1 / 2 | 12 |" in readme and "| `k2` |  | not run | – |" in readme


def _fake_repo(tmp_path, monkeypatch, shipped_cells=True, user_cells=False):
    monkeypatch.delenv("PACE_NB_RESULTS", raising=False)
    monkeypatch.setattr(config, "repo_root", lambda: tmp_path)
    rows = make_rows(receivers=False)
    if shipped_cells:
        ResultsStore(tmp_path / "results").append(rows, cell_key="shipped")
    if user_cells:
        ResultsStore(tmp_path / "data" / "results").append(rows.assign(dataset="CiteSeer"), cell_key="mine")
    return rows


def test_reading_order_of_stores(tmp_path, monkeypatch):
    _fake_repo(tmp_path, monkeypatch)
    (tmp_path / "data" / "results").mkdir(parents=True)  # an empty user store does not hide the shipped one
    store = ResultsStore.for_reading()
    assert store.root == tmp_path / "results" and store.read_only
    assert set(load_results().dataset) == {"Cora"}
    ResultsStore(tmp_path / "data" / "results").append(make_rows(dataset="CiteSeer", receivers=False), cell_key="m")
    assert ResultsStore.for_reading().root == tmp_path / "data" / "results"  # the user's own store wins
    assert set(load_results().dataset) == {"CiteSeer"}
    monkeypatch.setenv("PACE_NB_RESULTS", str(tmp_path / "env"))
    assert ResultsStore.for_reading().root == tmp_path / "env" and load_results().empty
    assert ResultsStore.for_reading(tmp_path / "results").root == tmp_path / "results"  # argument first
    assert not ResultsStore.for_reading(tmp_path / "results").read_only  # named explicitly: the maintainer's store
    with pytest.raises(ConfigError, match="does not exist"):
        ResultsStore.for_reading(tmp_path / "nowhere", must_exist=True)


def test_runs_never_write_into_the_shipped_store(tmp_path, monkeypatch):
    from pace_nb.experiments.grid import parse_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.methods.registry import METHODS

    _fake_repo(tmp_path, monkeypatch)
    before = sorted(p.name for p in (tmp_path / "results" / "cells").iterdir())
    shipped = ResultsStore.for_reading()
    with pytest.raises(ConfigError, match="read-only"):
        shipped.append(make_rows(receivers=False), cell_key="x")
    with pytest.raises(ConfigError, match="read-only"):
        shipped.discard("shipped")
    cfg = parse_config('[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n')
    runner = lambda cell: make_rows(dataset=cell.dataset, seeds=cell.seeds, receivers=False,
                                    methods={("local", "native", 0): 0.0})
    rep = run_grid(cfg, runner=runner, known_methods=METHODS, progress=False)
    assert rep.count("ran") == 1
    assert sorted(p.name for p in (tmp_path / "results" / "cells").iterdir()) == before
    assert ResultsStore(tmp_path / "data" / "results").keys() == [rep.records[0]["key"]]
    assert ResultsStore(tmp_path / "data" / "results").cells()["wall_seconds"].notna().all()


@pytest.mark.skipif(not (ROOT / "results" / "cells").is_dir(), reason="no shipped results store")
def test_committed_report_matches_the_shipped_store():
    text = report.report_from_store(ResultsStore(ROOT / "results", create=False), sorted((ROOT / "configs").glob("*.toml")))
    committed = (ROOT / "REPRODUCTION.md").read_text(encoding="utf-8")
    assert committed == text, "REPRODUCTION.md is stale: run `pace-nb report --store-readme` and commit it"
    readme = store_readme.readme_from_store(ResultsStore(ROOT / "results", create=False), sorted((ROOT / "configs").glob("*.toml")))
    assert (ROOT / "results" / "README.md").read_text(encoding="utf-8") == readme


def test_report_command_writes_and_checks(tmp_path, capsys):
    from pace_nb.cli import main

    ResultsStore(tmp_path / "res").append(_table1_rows(OFFSETS), cell_key="k1", seconds=3.0)
    (tmp_path / "cfg").mkdir()
    args = ["report", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "R.md"), "--configs", str(tmp_path / "cfg")]
    assert main(args + ["--store-readme"]) == 0
    text = (tmp_path / "R.md").read_text(encoding="utf-8")
    assert "| 1 | 120 | 4 | 25% | 50% | 75% | 25% of 4 |" in text and (tmp_path / "res" / "README.md").is_file()
    assert main(args + ["--store-readme", "--check"]) == 0
    (tmp_path / "R.md").write_text(text + "edited\n", encoding="utf-8")
    assert main(args + ["--check"]) == 1
    assert main(["report", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "R2.md")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "R2.md").exists()


def test_a_users_report_names_the_store_as_given_and_the_machines_its_manifests_record(tmp_path, monkeypatch):
    from pace_nb.cli import main

    monkeypatch.chdir(tmp_path)
    rec = {"device": "cuda:0", "threads": 4, "cpus": 16}
    store = ResultsStore(tmp_path / "data" / "results")
    store.append(_table1_rows(OFFSETS), cell_key="k1", seconds=3.0, provenance=rec)
    store.append(make_rows(dataset="CiteSeer", receivers=False), cell_key="k2", seconds=1.0)  # an old cell
    assert main(["report", "--results", "data/results", "--out", "REPORT.md", "--configs", str(tmp_path)]) == 0
    text = (tmp_path / "REPORT.md").read_text(encoding="utf-8")
    assert "from the results store `data/results` (2 cells" in text
    assert "their manifests record: cuda:0 (16 CPUs), 4 threads (1 cell); not recorded (1 cell)." in text
    assert "2-core" not in text and "OMP_NUM_THREADS" not in text
    assert config.store_label(ROOT / "results") == "results/"  # the committed report names no machine path


def test_outside_a_checkout_readers_say_where_the_shipped_store_is(tmp_path, monkeypatch, capsys):
    from pace_nb.cli import main

    monkeypatch.setattr(config, "repo_root", lambda: None)
    monkeypatch.delenv("PACE_NB_RESULTS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for argv in (["tables"], ["report"], ["report", "--out", str(tmp_path / "R.md")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("pace-nb: error:") and "--results <clone>/results" in err, err
    assert not list(tmp_path.iterdir())


def _drawn(offsets: dict[tuple[str, str], float], data_seed: int) -> pd.DataFrame:
    """Table 1 Cora rows (see :func:`_table1_rows`) that record their data seed, as grid rows do."""
    return _table1_rows(offsets).assign(params=json.dumps({"data": {"seed": data_seed, "scheme": "louvain"}}))


def test_data_seeds_from_the_column_old_rows_from_params():
    from pace_nb.analysis.draws import data_seeds

    params = [json.dumps({"data": {"seed": 2025}}), "{}", "", "not json", json.dumps({"data": {"seed": True}}),
              None, json.dumps({"seed": 7})]
    old = pd.DataFrame({"dataset": "Cora", "partition": "louvain", "num_clients": 3, "seed": 1, "method": "pace",
                        "variant": "full", "rank": 6, "receiver": -1, "acc": 50.0, "params": params})
    assert data_seeds(old).tolist() == [2025, -1, -1, -1, -1, -1, -1]  # migrated: params.data.seed
    assert data_seeds(old.assign(data_seed=[3, 4, 5, 6, 7, 8, 9])).tolist() == [3, 4, 5, 6, 7, 8, 9]


def test_draw_spread_against_numpy_and_the_mask_draw_cause():
    import numpy as np

    from pace_nb.analysis import draws as dr
    from pace_nb.analysis.tables import comparison

    main = comparison("1", _drawn(OFFSETS, 2024))
    others = {2025: comparison("1", _drawn({k: v + 1.0 for k, v in OFFSETS.items()}, 2025)),
              2026: comparison("1", _drawn({k: v - 2.5 for k, v in OFFSETS.items()}, 2026))}
    spread = dr.draw_spread("1", main, others)
    i = main.index[(main["method"] == "pace") & (main["dataset"] == "Cora") & (main["metric"] == "acc")][0]
    vals = [main.loc[i, "ours_mean"] + d for d in (0.0, 1.0, -2.5)]
    assert spread.loc[i, "n_draws"] == 3
    assert spread.loc[i, "draw_std"] == pytest.approx(np.std(vals, ddof=1))
    assert (spread.loc[i, "draw_min"], spread.loc[i, "draw_max"]) == pytest.approx((min(vals), max(vals)))
    assert (spread["n_draws"][main["ours_mean"].isna()] == 0).all()  # entries not run have no spread
    assert dr.draw_spread("1", main, dict(list(others.items())[:1]))["n_draws"].max() == 0  # 2 draws: too few
    assert dr.draw_spread("4", comparison("4", _drawn(OFFSETS, 2024)), others)["n_draws"].max() == 0


def test_report_reads_the_mask_draws_of_the_store(tmp_path):
    store = ResultsStore(tmp_path / "store")
    store.append(_drawn(OFFSETS, 2024), cell_key="k1", cell={"kind": "protocol", "dataset": "Cora"}, seconds=5.0)
    draws = ResultsStore(tmp_path / "store" / "draws")
    for i, (shift, seed) in enumerate(((-3.0, 2025), (-6.0, 2026), (-4.0, 2027))):
        draws.append(_drawn({k: v + shift for k, v in OFFSETS.items()}, seed), cell_key=f"d{i + 1}", seconds=4.0)
    draws.append(_drawn({k: v + 50.0 for k, v in OFFSETS.items()}, 2024), cell_key="d0", seconds=4.0)  # the main draw again: ignored
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n', encoding="utf-8")
    paper = paper_values("pace", table="1", dataset="Cora", method="pace", metric="acc").value.item()

    def pace_acc(text):
        return [ln for ln in text.splitlines() if ln.startswith("| 1 | PACE (Ours) | Cora Acc |")]

    # our PACE accuracy draws: paper + 3, 0, −3, −1 (4 draws): the paper's value is inside their range, but
    # 4 < 5 draws give no cause
    line = pace_acc(report.report_from_store(store, [cfg], tables=["1"]))
    assert len(line) == 1 and f"{paper - 3.0:.2f}–{paper + 3.0:.2f} (4)" in line[0]
    assert "mask draw" not in line[0] and line[0].endswith("| unexplained |")
    draws.append(_drawn({k: v - 5.0 for k, v in OFFSETS.items()}, 2028), cell_key="d4", seconds=4.0)
    text = report.report_from_store(store, [cfg], tables=["1"])
    assert f"mask draw (paper inside our 5 draws {paper - 3.0:.2f}–{paper + 3.0:.2f})" in pace_acc(text)[0]
    assert "(1 cells," in text  # the draws are not counted as the main store's cells
    readme = store_readme.readme_from_store(store, [cfg])
    assert "`d1`" in readme and "draws/" in readme


def _dirichlet(offset: dict[str, float], data_seed: int) -> pd.DataFrame:
    """Table 12 Cora rows of FedAvg / FedProx whose accuracy means are the paper's value + offset."""
    paper = paper_values("pace", table="12", dataset="Cora", metric="acc").set_index("method")["value"]
    rows = make_rows(dataset="Cora", partition="dirichlet", num_clients=10, receivers=False, base=0.0,
                     methods={(m, "native", 0): float(paper[m]) + off - 0.3 for m, off in offset.items()})
    return rows.assign(beta=0.5, params=json.dumps({"beta": 0.5, "data": {"seed": data_seed, "scheme": "dirichlet"}}))


def test_a_partition_draw_applies_only_to_methods_whose_draws_are_stored():
    """FedAvg's and FedProx's Table 12 entries are 5 points above the paper; four more partition draws are
    stored for FedAvg only (paper − 1 … paper + 2): FedAvg's entry is a partition draw, FedProx's stays
    unexplained."""
    main = _dirichlet({"fedavg": 5.0, "fedprox": 5.0}, 2024)
    draws = {s: _dirichlet({"fedavg": off}, s) for s, off in ((2025, -1.0), (2026, 0.5), (2027, 2.0), (2028, 1.0))}
    far = report.analyse(main, ["12"], draws).far
    acc = far[far["col"] == "Cora Acc"].set_index("row")
    assert acc.loc["FedAvg", "status"] == "explained" and acc.loc["FedAvg", "kinds"] == ("partition draw",)
    assert acc.loc["FedAvg", "draws"].endswith("(5)")
    assert acc.loc["FedProx", "status"] == "unexplained" and acc.loc["FedProx", "draws"] == ""
    # three draws of FedAvg (4 with the main one): too few for the cause
    few = report.analyse(main, ["12"], dict(list(draws.items())[:3])).far
    assert few[(few["col"] == "Cora Acc") & (few["row"] == "FedAvg")]["status"].item() == "unexplained"


def test_time_table_divides_by_runs_and_states_the_released_budget():
    """Seconds per run = the pooled rows' seconds over their seeds (one CNLL repeat not counted
    twice); a one-shot baseline's budget line comes from its own configuration."""
    rows = pd.DataFrame({"cell": ["a", "a", "a", "b", "b", "a"], "receiver": [-1, -1, -1, -1, -1, 0],
                         "dataset": ["Cora"] * 6, "seed": [1, 2, 2, 1, 2, 1],
                         "method": ["ghost", "ghost", "ghost", "ghost", "fedavg", "ghost"],
                         "seconds": [10.0, 20.0, 20.0, 30.0, 4.0, 99.0]})
    cells = pd.DataFrame({"key": ["a", "b"], "wall_seconds": [40.0, 50.0], "kind": ["spear", "spear"]})
    t = report.time_by_method(rows, cells).set_index("phase")
    ghost = t.loc["GHOST"]
    assert (ghost["seconds"], ghost["cells"], ghost["runs"]) == (60.0, 2, 3)
    assert ghost["per_run"] == pytest.approx(20.0)
    assert "100 generator steps" in ghost["budget"] and "FGW" in ghost["budget"]
    assert t.loc["spear cells (rest)", "seconds"] == pytest.approx(90.0 - 64.0)
    from pace_nb.methods.contract import make
    assert make("ghost", gen_steps=7).budget().startswith("released budget: 7 generator steps")
    assert report.method_budget("no-such-method") == ""
