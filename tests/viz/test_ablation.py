"""The papers' values on the reproduced figures: PACE Table 2 / Table 6, SPEAR Tab. 2 (viz/ablation.py),
PACE Fig. 4 with the paper's means and pooled units (viz/harm.py), SPEAR Fig. 4's β panel (viz/sweeps.py)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.analysis import tables
from pace_nb.analysis.paper_values import paper_values
from pace_nb.viz import ablation
from pace_nb.viz import frames as views
from pace_nb.viz import pace as plots
from pace_nb.viz import spear as spear_plots
from pace_nb.viz.check import figure_problems
from pace_nb.viz.style import set_style

VARIANTS = ("transport", "fixed0.5", "mean", "raw", "direct", "full")


@pytest.fixture(autouse=True)
def _close():
    set_style()
    yield
    plt.close("all")


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _table2_rows(dataset="Cora", base=79.0) -> pd.DataFrame:
    """Local, Transport 15 points below, the CNLL rows within a point (the shape of Cora's Table 2)."""
    offsets = {"transport": -15.0, "fixed0.5": 0.9, "mean": 0.1, "raw": 0.8, "direct": 0.6, "full": 0.8}
    methods = {("local", "native", 0): 0.0, **{("pace", v, 6): offsets[v] for v in VARIANTS}}
    return make_rows(dataset, num_clients=10, methods=methods, base=base, receivers=False)


def test_table2_figure_has_every_row_the_paper_and_a_zoomed_axis():
    comp = tables.build_tables(_table2_rows(), ["2"])["2"]
    fig = ablation.plot_variants(comp)
    assert figure_problems(fig) == []
    cora, citeseer, pubmed = fig.axes
    assert [t.get_text() for t in cora.get_yticklabels()] == list(dict.fromkeys(comp["row"]))
    assert "Fixed α=0.5" in [t.get_text() for t in cora.get_yticklabels()]
    assert cora.get_title() == "Cora (5 seeds)"
    lo, hi = cora.get_xlim()
    assert 75 < lo < 79.16 and hi < 82  # zoomed to the CNLL rows and Local, not from 0
    assert [t for t in _texts(fig) if t.startswith("ours")] == ["ours 64.3, paper 63.5"]  # Transport: at the edge
    from matplotlib.collections import PathCollection

    crosses = [c for c in cora.collections if isinstance(c, PathCollection)]
    assert len(crosses) == 6  # the paper's × of every row but Transport's (off the axis)
    assert "not run" in [t.get_text() for t in citeseer.texts] and "not run" in [t.get_text() for t in pubmed.texts]


def test_zoom_keeps_the_values_near_the_best():
    lo, hi = ablation.zoom_limits([64.0, 79.2, 80.1, float("nan")], spread=10)
    assert 78.5 < lo < 79.2 and 80.1 < hi < 80.6
    lo, _ = ablation.zoom_limits([64.5, 72.3], spread=10)
    assert lo < 64.5  # within the spread: on the axis


def test_resolver_and_robustness_figures_say_what_was_not_run():
    rows = pd.concat([make_rows("Cora", num_clients=k, receivers=False,
                                methods={("pace", "transport", 6): -10.0, ("pace", "full", 6): 0.0})
                      for k in (10, 20, 30)])
    fig = ablation.plot_resolver(tables.build_tables(rows, ["6"])["6"])
    assert figure_problems(fig) == []
    assert fig.axes[0].get_title() == "Cora (5 seeds)" and len(fig.axes[0].containers) == 2
    assert "not run" in _texts(fig)  # the paper's other datasets
    comp = pd.DataFrame({"row": ["all", "all", "Cora", "Cora", "CS", "CS"], "dataset": ["all", "all", "Cora", "Cora", "CS", "CS"],
                         "variant": ["edge_noise", "feature_noise"] * 3, "metric": "max_drop_pts",
                         "paper_mean": [0.6, 1.0, np.nan, np.nan, np.nan, np.nan],
                         "ours_mean": [0.3, 0.9, 0.3, 0.9, np.nan, np.nan], "ours_std": [0.1] * 6,
                         "n_seeds": [3, 3, 3, 3, 0, 0]})
    fig = ablation.plot_robustness(comp)
    assert figure_problems(fig) == []
    assert _texts(fig).count("not run") == 2 and " paper: within 0.6" in _texts(fig)
    assert "3 data seeds" in fig.get_suptitle()


def test_paper_fig4_values_come_from_its_tables():
    t1 = paper_values("pace", table="1")
    means = views.paper_paired_means(t1).set_index(["dataset", "metric"])["value"]
    pick = lambda m: t1[(t1.dataset == "Cora") & (t1.metric == "acc") & (t1.method == m)]["value"].item()
    assert means[("Cora", "acc")] == pytest.approx(pick("pace") - pick("local"))
    units = views.paper_harm_units(paper_values("pace", table="A"))
    a = paper_values("pace", table="A").set_index("metric")["value"]
    assert units == {"datasets": ["Cora", "CiteSeer", "PubMed"], "helped": a["helped"], "tied": a["tied"],
                     "harmed": a["harmed"]}


def test_fig4_shows_the_papers_means_clips_a_far_row_and_pools_the_units():
    from pace_nb.analysis import diagnostics

    rows = pd.concat([make_rows(d, methods={("local", "native", 0): 0.0, ("pace", "full", 6): off})
                      for d, off in (("Cora", 0.5), ("CiteSeer", 7.0), ("PubMed", 0.4))])
    rep = diagnostics.diagnostics_report(rows)
    paper = views.paper_paired_means(paper_values("pace", table="1"))
    fig = plots.plot_paired_differences(rep["paired"], paper=paper)
    assert figure_problems(fig) == []
    clipped = [t for t in _texts(fig) if "paper" in t]
    assert clipped == ["+7.00 (paper +8.41)", "+7.00 (paper +7.45)"]  # CiteSeer, at the right edge
    assert fig.axes[0].get_xlim()[1] < 2  # the others stay readable
    fig = plots.plot_harm_units(rep["harm"], rep["receivers"], paper=views.paper_harm_units(paper_values("pace", table="A")))
    assert figure_problems(fig) == []
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-2:] == ["ours, Cora+CiteSeer+PubMed", "paper, Cora+CiteSeer+PubMed"]
    assert {"118", "15", "17"} <= set(_texts(fig))


def test_store_first_keeps_the_store_and_fills_what_it_lacks(tmp_path):
    from pace_nb.experiments.store import ResultsStore

    stored = _table2_rows("Cora", base=79.0)
    store = ResultsStore(tmp_path / "store")
    store.append(stored)
    own = pd.concat([_table2_rows("Cora", base=50.0), _table2_rows("demo", base=60.0)])
    got = views.store_first(own, str(tmp_path / "store"))
    assert set(got[got.dataset == "Cora"]["acc"]) == set(stored["acc"]) and (got.dataset == "demo").any()


def test_sweeps_beta_panel_is_full_width_and_names_the_baselines():
    rows = [{"param": "beta", "value": b, "acc": 70.0 + s, "variant": v, "dataset": "Cora", "num_clients": 10,
             "seed": s} for b in (0.05, 0.5) for v in ("full", "no_ppr") for s in range(3)]
    rows += [{"param": p, "value": x, "acc": 60.0, "variant": "full", "dataset": "Cora", "num_clients": 10, "seed": 0}
             for p in ("gamma", "T", "a") for x in (0.1, 1.0)]
    base = pd.DataFrame({"method": ["spear", "fedavg", "fedcvae"], "ours": [77.0, 45.0, 73.0], "ours_std": [1.0, 2.0, 1.0]})
    fig = spear_plots.plot_sweeps(pd.DataFrame(rows), hue={"beta": "variant", "gamma": "dataset", "T": "dataset",
                                                           "a": "dataset"}, baselines=base, defaults={"beta": 0.05})
    assert figure_problems(fig) == []
    beta_ax, *others, base_ax = fig.axes
    width = lambda ax: ax.get_position().width
    assert width(beta_ax) > 1.8 * width(others[0])  # two thirds of the row, not a quarter
    assert [t.get_text() for t in base_ax.get_yticklabels()] == ["FedAvg", "FedCVAE", "SPEAR"]  # names, best on top
    assert "not run" in beta_ax.get_title()
    assert all(len(lg.get_texts()) <= 5 for lg in fig.legends)  # no 19-entry legend


def test_silos_figure_shows_alpha_and_names_the_worst_silo():
    rows = make_rows("Cora", num_clients=4)
    rows.loc[(rows.method == "pace") & (rows.receiver == 2), "acc"] -= 5  # silo 2 harmed
    silos = views.silo_frame(rows)
    assert sorted(silos.columns) == ["alpha", "diff", "receiver", "seed"] and len(silos) == 4 * 5
    assert silos.groupby("receiver")["diff"].mean().idxmin() == 2
    fig = plots.plot_silos(silos)
    assert figure_problems(fig) == []
    assert any(t.startswith("worst: silo 2, -4.00") for t in _texts(fig))
    assert "5 seeds" in fig.get_suptitle()
