"""Paper values typed in exactly; tables render ours beside the paper's, "not run" otherwise."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import FIXTURES
from fake_results import make_rows
from pace_nb.analysis import tables as T
from pace_nb.cli import main
from pace_nb.core.errors import UnknownNameError
from pace_nb.analysis.paper_values import paper_values
from pace_nb.experiments.store import ResultsStore

#: the lines of the PACE paper holding its tables and reported numbers (tests/fixtures/README.md)
PAPER_TEXT = FIXTURES / "pace_paper_tables.txt"


def _pv(**kw):
    return paper_values("pace", **kw).set_index(["method", "variant"])


def test_spot_checks_against_paper_text():
    t1 = paper_values("pace", table=1, dataset="Cora", metric="acc").set_index("method")
    assert t1.loc["local", "value"] == 79.16 and t1.loc["local", "std"] == 0.25
    assert t1.loc["fedavg", "value"] == 33.18 and t1.loc["pace", "value"] == 80.34
    assert paper_values("pace", table=1, dataset="ogbn-arxiv", method="fedaux1r", metric="f1_weighted").value.item() == 52.69
    assert paper_values("pace", table=8, dataset="Cora", method="local", metric="acc").value.item() == 75.69
    assert paper_values("pace", table=9, dataset="Cora", method="fedavg", metric="acc")["std"].item() == 0.0
    t10 = paper_values("pace", table=10, num_clients=30, dataset="ogbn-arxiv", method="pace")
    assert (t10.value.item(), t10["std"].item()) == (42.03, 0.27)
    assert _pv(table=2, dataset="CiteSeer").loc[("pace", "fixed0.5"), "value"] == 69.96
    t3 = paper_values("pace", table=3, dataset="Computers").set_index("metric").value
    assert (t3["alpha_mean"], t3["alpha_zero_pct"], t3["upload_pct"], t3["return_pct"]) == (0.134, 22.0, 13.1, 11.1)
    t5 = paper_values("pace", table=5, rank=0, dataset="citation-mean").set_index("metric").value
    assert (t5["upload_pct"], t5["return_pct"]) == (101.95, 100.04)
    t6 = paper_values("pace", table=6, dataset="Computers", num_clients=20, metric="delta_acc")
    assert t6.value.item() == 51.33
    t7 = _pv(table=7, dataset="PubMed", metric="f1_weighted")
    assert t7.loc[("fednova", "cnll"), "value"] == 68.04 and t7.loc[("fednova", "native"), "value"] == 29.41
    t12 = paper_values("pace", table=12, dataset="CS", method="pace", metric="acc")
    assert t12.value.item() == 91.48 and t12.beta.item() == 0.5 and t12.partition.item() == "dirichlet"
    sp = paper_values("spear", table="ablation").set_index("variant").value
    assert (sp["no_both"], sp["no_shrinkage"]) == (74.33, 62.84)


def test_table_sizes():
    sizes = paper_values("pace").groupby("table").size()
    assert sizes.to_dict() == {"1": 120, "10": 180, "11": 100, "12": 100, "2": 21, "3": 24, "4": 18, "5": 25,
                               "6": 90, "7": 114, "8": 120, "9": 120, "A": 8}
    assert not paper_values("pace").duplicated(
        ["table", "dataset", "num_clients", "partition", "method", "variant", "rank", "metric"]).any()


def test_every_mean_std_pair_occurs_in_the_paper_text():
    text = PAPER_TEXT.read_text(encoding="utf-8")
    pv = paper_values("pace")
    pairs = pv.dropna(subset=["std"])
    nums = set(re.findall(r"(\d+\.\d+) \$\\pm\$ (\d*\.\d+)", text))
    found = {(float(a), float(b)) for a, b in nums}
    missing = [(r.table, r.dataset, r.method, r.metric) for r in pairs.itertuples() if (r.value, r.std) not in found]
    assert not missing
    bare = set(float(x) for x in re.findall(r"[+-]?\d+(?:\.\d+)?", text))
    assert all(abs(v) in bare or v in bare for v in pv.value)


def test_tables_ours_beside_paper_and_not_run():
    rows = pd.concat([make_rows(num_clients=10, base=78.0),
                      make_rows(dataset="CiteSeer", num_clients=10,
                                methods={("pace", "transport", 6): -3.0, ("pace", "full", 6): 1.0,
                                         ("fedavg", "cnll", 0): 0.5, ("FedTAD", "cnll", 0): 0.7})])
    comp = T.comparison("1", rows)
    cora = comp[(comp.dataset == "Cora") & (comp.method == "local") & (comp.metric == "acc")].iloc[0]
    accs = 78 + 0.1 * np.arange(1, 6)
    assert cora.ours_mean == pytest.approx(accs.mean()) and cora.ours_std == pytest.approx(accs.std(ddof=1))
    assert cora.paper_mean == 79.16 and cora["diff"] == pytest.approx(accs.mean() - 79.16) and cora.n_seeds == 5
    arxiv = comp[comp.dataset == "ogbn-arxiv"]
    assert (arxiv.status == "not run").all() and arxiv.ours_mean.isna().all()
    md = T.render_markdown("1", comp)
    assert "| Cora Acc |" in md and "78.30 ± 0.16 / 79.16 ± 0.25 (-0.86)" in md and "not run / 66.86 ± 0.18" in md
    tex = T.render_latex("1", comp)
    assert r"79.16 $\pm$ 0.25" in tex and r"\begin{tabular}" in tex
    t6 = T.comparison("6", rows)
    delta = t6[(t6.dataset == "CiteSeer") & (t6.num_clients == 10) & (t6.metric == "delta_acc")].iloc[0]
    assert delta.ours_mean == pytest.approx(4.0) and delta.paper_mean == 0.0
    t4 = T.comparison("4", rows)
    m = t4[(t4.dataset == "CiteSeer") & (t4.col == "Matched") & (t4.metric == "acc")].iloc[0]
    assert m.ours_text == "FedTAD+CNLL" and m.ours_mean == pytest.approx(70.0 + 0.7 + 0.3)
    t3 = T.comparison("3", rows).set_index(["dataset", "metric"])
    assert t3.loc[("Cora", "alpha_mean"), "ours_mean"] == 0.5 and t3.loc[("Cora", "upload_pct"), "ours_mean"] == 12.0
    t7 = T.comparison("7", rows)  # Local + CNLL is Local
    lc = t7[(t7.method == "local") & (t7.variant == "cnll") & (t7.dataset == "Cora") & (t7.metric == "acc")]
    assert lc.ours_mean.item() == pytest.approx(accs.mean())


def test_an_entry_with_fewer_seeds_than_its_table_says_how_many():
    """A setting pooled over fewer seeds than the table's others (a cell not yet run for every
    seed) carries "(n = k)" beside its mean, so it never reads as the full count."""
    rows = make_rows(num_clients=10, base=78.0)
    part = make_rows(dataset="CiteSeer", num_clients=10, base=70.0)
    part = part[part["seed"].isin(sorted(set(part["seed"]))[:2])]
    comp = T.comparison("1", pd.concat([rows, part]))
    assert T.full_seeds(comp) == 5
    md = T.render_markdown("1", comp)
    cite = comp[(comp.dataset == "CiteSeer") & (comp.method == "local") & (comp.metric == "acc")].iloc[0]
    assert cite.n_seeds == 2 and f"{cite.ours_mean:.2f} ± {cite.ours_std:.2f} (n = 2) /" in md
    assert "(n = 5)" not in md and T.seeds_note(5, 5) == "" and T.seeds_note(None, 5) == ""


def test_appendix_a_from_receiver_units():
    rows = pd.concat([make_rows(dataset=d, num_clients=10) for d in ("Cora", "CiteSeer", "PubMed")])
    comp = T.comparison("A", rows).set_index("metric")
    assert comp.loc["units", "ours_mean"] == 150 and comp.loc["units", "paper_mean"] == 150
    assert comp.loc["helped", "ours_mean"] == 150 and comp.loc["helped", "paper_mean"] == 118
    assert comp.loc["worst_unit", "ours_mean"] == pytest.approx(1.0) and comp.loc["worst_unit", "paper_mean"] == -3.64
    assert "| helped | 150 / 118 (+32.00) |" in T.render_markdown("A", T.comparison("A", rows))
    assert (T.comparison("A", rows[rows.dataset != "PubMed"]).status == "not run").all()


def test_spear_tables():
    rows = []
    for seed, (full, edge, feat) in enumerate([(80.0, 79.5, 79.0), (82.0, 81.7, 81.0)]):
        for variant, acc in (("full", full), ("edge_noise", edge), ("feature_noise", feat), ("no_both", 70.0)):
            rows.append(dict(dataset="Computers", partition="dirichlet", num_clients=10, seed=seed, method="spear",
                             variant=variant, rank=0, receiver=-1, acc=acc, params='{"beta": 0.05}'))
    rows = pd.DataFrame(rows)
    abl = T.comparison("spear-ablation", rows).set_index(["dataset", "variant"])
    assert abl.loc[("Computers", "no_both"), "ours_mean"] == 70.0 and abl.loc[("Computers", "no_both"), "paper_mean"] == 74.33
    assert abl.loc[("Computers", "full"), "ours_mean"] == 81.0 and np.isnan(abl.loc[("Computers", "full"), "paper_mean"])
    assert abl.loc[("Computers", "no_ppr"), "status"] == "not run"
    rob = T.comparison("spear-robustness", rows).set_index(["dataset", "variant"])
    assert rob.loc[("all", "edge_noise"), "ours_mean"] == pytest.approx(0.4)
    assert rob.loc[("Computers", "feature_noise"), "ours_mean"] == pytest.approx(1.0)
    assert "not run / 18.80" in T.render_markdown("spear-efficiency", T.comparison("spear-efficiency", rows))
    # SPEAR's comparison writes spear/full rows too (params.evaluation): they stay out of Tab. 4's cells
    comp = rows[rows.variant == "full"].assign(acc=50.0, params='{"beta": 0.05, "evaluation": "complete_graph"}')
    both = T.comparison("spear-ablation", pd.concat([rows, comp])).set_index(["dataset", "variant"])
    assert both.loc[("Computers", "full"), "ours_mean"] == 81.0 and both.loc[("Computers", "full"), "n_seeds"] == 2
    every = T.build_tables(pd.concat([rows, comp]))  # the same setting × seed with other params: no mixing error
    assert every["spear-ablation"].set_index(["dataset", "variant"]).loc[("Computers", "full"), "ours_mean"] == 81.0


def test_cli_writes_every_format(tmp_path):
    store = ResultsStore(tmp_path / "res")
    store.append(make_rows(num_clients=10), cell_key="c")
    assert main(["tables", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "out"),
                 "--tables", "1,3,spear-ablation", "--json", str(tmp_path / "t.json")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["index.md"] + [f"table_{t}.{e}" for t in ("1", "3", "spear-ablation") for e in ("csv", "md", "tex")]
    csv = pd.read_csv(tmp_path / "out" / "table_1.csv")
    assert {"ours_mean", "paper_mean", "diff", "status"} <= set(csv.columns) and (csv.status == "ok").sum() == 4
    assert main(["tables", "--results", str(tmp_path / "res"), "--tables", "99"]) == 2
    with pytest.raises(UnknownNameError):
        T.select_tables("1,bogus")


@pytest.mark.parametrize("table, blocks", [
    ("1", [["Cora", "CiteSeer", "PubMed"], ["CS", "Computers", "ogbn-arxiv"]]),
    ("9", [["Cora", "CiteSeer", "PubMed"], ["CS", "Computers", "ogbn-arxiv"]]),
    ("11", [["Cora", "CiteSeer", "PubMed"], ["CS", "Computers"]]),
    ("12", [["Cora", "CiteSeer", "PubMed"], ["CS", "Computers"]]),
])
def test_rows_rebuilt_from_csv_are_lines_of_the_paper(table, blocks):
    """Placement check: each method's row, rebuilt from the tidy CSV, is a line of the paper text."""
    lines = set(PAPER_TEXT.read_text(encoding="utf-8").splitlines())
    pv = paper_values("pace", table=table).set_index(["method", "dataset", "metric"])
    for method in dict.fromkeys(pv.index.get_level_values(0)):
        label = T.method_label(method)
        for datasets in blocks:
            cells = [pv.loc[(method, d, m)] for d in datasets for m in ("acc", "f1_weighted")]
            line = label + "\t" + "\t".join(f"{c.value:.2f} $\\pm$ {c['std']:.2f}" for c in cells)
            assert line in lines, line


def test_cli_prints_the_tables_and_writes_to_the_current_folder_only(tmp_path, monkeypatch, capsys):
    store = ResultsStore(tmp_path / "res")
    store.append(make_rows(num_clients=10), cell_key="c")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["tables", "--results", str(tmp_path / "res"), "--tables", "1,spear-ablation"]) == 0
    out = capsys.readouterr().out
    after = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if "here" not in p.parts)
    assert after == before  # nothing written beside (or into) the store that was read
    for tid in ("1", "spear-ablation"):  # each table itself is printed, as its markdown file holds it
        md = (tmp_path / "here" / "figures" / "tables" / f"table_{tid}.md").read_text(encoding="utf-8")
        assert md.strip() in out and md.count("\n") > 5


def test_spear_robustness_tables_split_by_scope_and_carry_notes():
    rows = []
    for seed in (0, 1):
        for variant, acc, scope in (("full", 80.0, None), ("edge_noise", 79.0, "clients"), ("edge_noise", 70.0, "global"),
                                    ("feature_noise", 80.5, "clients"), ("feature_noise", 60.0, "global")):
            params = {"beta": 0.05, **({"scope": scope} if scope else {})}
            rows.append(dict(dataset="Cora", partition="dirichlet", num_clients=10, seed=seed, method="spear",
                             variant=variant, rank=0, receiver=-1, acc=acc, params=json.dumps(params)))
    rows = pd.DataFrame(rows)
    cl = T.comparison("spear-robustness", rows).set_index(["dataset", "variant"])
    gl = T.comparison("spear-robustness-global", rows).set_index(["dataset", "variant"])
    assert cl.loc[("Cora", "edge_noise"), "ours_mean"] == pytest.approx(1.0)
    assert cl.loc[("Cora", "feature_noise"), "ours_mean"] == pytest.approx(-0.5)
    assert gl.loc[("Cora", "edge_noise"), "ours_mean"] == pytest.approx(10.0)
    assert gl.loc[("all", "feature_noise"), "ours_mean"] == pytest.approx(20.0)
    md = T.render_markdown("spear-robustness", T.comparison("spear-robustness", rows))
    assert "scope: clients" in md and "* Scope clients" in md
    assert "* FedNova: full-batch local training" in T.render_markdown("1", T.comparison("1", None))


def _robust_rows(edge_drops, feature_drops, dataset="Cora"):
    rows = []
    for seed, (de, df) in enumerate(zip(edge_drops, feature_drops, strict=True)):
        for variant, acc in (("full", 80.0), ("edge_noise", 80.0 - de), ("feature_noise", 80.0 - df)):
            rows.append(dict(dataset=dataset, partition="dirichlet", num_clients=10, seed=seed, method="spear",
                             variant=variant, rank=0, receiver=-1, acc=acc,
                             params=json.dumps({"beta": 0.05, "scope": "clients"})))
    return pd.DataFrame(rows)


def test_spear_robustness_is_scored_against_the_papers_upper_bounds():
    from pace_nb.analysis import report

    # Cora: edge drops 0.9 / 1.1 (mean 1.0 > bound 0.6), feature drops 0.4 / 0.6 (mean 0.5 ≤ bound 1.0);
    # PubMed: smaller drops, so the paper's "all" bound is checked on Cora, the worst dataset
    rows = pd.concat([_robust_rows((0.9, 1.1), (0.4, 0.6)), _robust_rows((0.1, 0.2), (0.1, 0.1), "PubMed")])
    comp = T.comparison("spear-robustness", rows)
    allr = comp.set_index(["dataset", "variant"]).loc[("all", "edge_noise")]
    assert allr["bound"] and allr["ours_mean"] == pytest.approx(1.0) and allr["n_seeds"] == 2
    assert allr["ours_std"] == pytest.approx(np.std([0.9, 1.1], ddof=1))  # the worst dataset's spread
    se = np.std([0.9, 1.1], ddof=1) / np.sqrt(2)
    assert T.bound_verdict(allr) == f"exceeds by 0.40 = {0.4 / se:.1f} SE"
    feat = comp.set_index(["dataset", "variant"]).loc[("all", "feature_noise")]
    assert T.bound_verdict(feat) == "≤ bound"
    md = T.render_markdown("spear-robustness", comp)
    assert f"/ ≤ 0.60 (exceeds by 0.40 = {0.4 / se:.1f} SE)" in md and "/ ≤ 1.00 (≤ bound)" in md
    # scored by the excess only: 0.40 over the bound is within 1 point; 0.5 under the bound is an exact 0
    assert report.gaps(comp[comp["bound"]]).tolist() == pytest.approx([0.4, 0.0])
    a = report.agreement(comp)
    assert (a["run"], a["within_1"]) == (2, 1.0)
    far = report.far_cells("spear-robustness", T.comparison("spear-robustness", _robust_rows((3.0, 3.2), (0.0, 0.0))))
    assert len(far) == 1 and far["diff"].iloc[0] == pytest.approx(2.5)  # 3.1 − 0.6: the excess, not |ours − bound|


def test_spear_communication_units_per_client_kib_and_total_mib():
    rows = pd.DataFrame([
        dict(dataset="CiteSeer", partition="dirichlet", num_clients=10, seed=0, method="spear", variant="comm", rank=0,
             receiver=-1, acc=70.0, bytes_up=10 * 14812.0, bytes_down=0.0, params='{"beta": 0.05}'),
        dict(dataset="CiteSeer", partition="dirichlet", num_clients=10, seed=0, method="fedavg", variant="multiround",
             rank=0, receiver=-1, acc=70.0, bytes_up=100 * 10 * 2**20 / 2, bytes_down=100 * 10 * 2**20 / 2,
             params='{"beta": 0.05}')])
    comp = T.comparison("spear-efficiency", rows).set_index(["dataset", "method", "variant", "metric"])
    assert comp.loc[("CiteSeer", "spear", "comm", "comm_kb"), "ours_mean"] == pytest.approx(14812 / 1024)
    assert comp.loc[("CiteSeer", "fedavg", "multiround", "comm_mb"), "ours_mean"] == pytest.approx(1000.0)


def test_readers_take_study_and_scope_from_the_columns_not_params():
    """``is_comparison`` and the robustness scope read the columns: params that still say otherwise
    (the comparison's string, another scope) change nothing once the columns are set."""
    from pace_nb.analysis.spear_comparison import is_comparison

    misleading = json.dumps({"beta": 0.05, "evaluation": "complete_graph", "scope": "global"})
    rows = []
    for seed in (0, 1):
        for variant, acc, scope in (("full", 80.0, ""), ("edge_noise", 79.0, "clients"), ("edge_noise", 70.0, "global")):
            rows.append(dict(dataset="Cora", partition="dirichlet", num_clients=10, seed=seed, method="spear",
                             variant=variant, rank=0, receiver=-1, acc=acc, params=misleading, study="spear",
                             evaluation="complete_graph", beta=0.05, scope=scope, data_seed=seed, run_seed=-1))
    rows = pd.DataFrame(rows)
    assert not is_comparison(rows).any() and not is_comparison(rows["study"]).any()
    pace_row = rows.iloc[:1].assign(method="pace", study="pace", evaluation="receivers")
    assert not is_comparison(pace_row).any()  # its params hold '"evaluation": "complete_graph"': not read
    assert is_comparison(rows.assign(study="comparison")).all()
    abl = T.comparison("spear-ablation", rows).set_index(["dataset", "variant"])
    assert abl.loc[("Cora", "full"), "ours_mean"] == 80.0 and abl.loc[("Cora", "full"), "n_seeds"] == 2
    cl = T.comparison("spear-robustness", rows).set_index(["dataset", "variant"])
    gl = T.comparison("spear-robustness-global", rows).set_index(["dataset", "variant"])
    assert cl.loc[("Cora", "edge_noise"), "ours_mean"] == pytest.approx(1.0)
    assert gl.loc[("Cora", "edge_noise"), "ours_mean"] == pytest.approx(10.0)
    moved = T.comparison("spear-ablation", rows.assign(study="comparison")).set_index(["dataset", "variant"])
    assert moved.loc[("Cora", "full"), "status"] == "not run"  # comparison rows belong to Tab. 1/3 only


@pytest.mark.parametrize("table", ["1", "8", "9", "11", "12"])
def test_the_fednova_note_quotes_its_own_tables_numbers(table):
    p = paper_values("pace", table=table, method="fednova", variant="native").set_index(["dataset", "metric"])["value"]
    quoted = (f"(Cora {p[('Cora', 'acc')]:.2f} acc / {p[('Cora', 'f1_weighted')]:.2f} W-F1, "
              f"Computers {p[('Computers', 'acc')]:.2f} / {p[('Computers', 'f1_weighted')]:.2f})")
    assert f"the paper's FedNova {quoted} is near" in T.render_markdown(table, T.comparison(table, None))


def test_the_fednova_note_from_a_hand_built_table():
    from pace_nb.analysis.gap_notes import fednova_note

    paper = pd.DataFrame({"method": ["fednova", "fednova", "fednova", "fedavg"], "variant": ["native"] * 3 + ["native"],
                          "dataset": ["Cora", "Cora", "Computers", "Cora"],
                          "metric": ["acc", "f1_weighted", "acc", "acc"], "value": [30.5, 15.25, 37.0, 33.0]})
    assert "the paper's FedNova (Cora 30.50 acc / 15.25 W-F1) is near" in fednova_note(paper)  # Computers lacks W-F1
    assert "the paper's FedNova is near" in fednova_note(paper.iloc[3:])
