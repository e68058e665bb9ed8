"""Figures, their tidy inputs (views) and the widget explorers, on small synthetic objects."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from pace_nb.viz import pace as plots
from pace_nb.viz import spear as spear_plots
from pace_nb.viz import frames as views
from pace_nb.viz import widgets
from pace_nb.core.errors import ConfigError
from pace_nb.data.federation import ClientGraph, FederatedGraph
from pace_nb.nn.gcn import init_params
from pace_nb.nn.training import LocalModels, TrainConfig
from fake_results import make_rows
from pace_nb.viz.check import figure_problems


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


# ----------------------------------------------------------------------------- fixtures
def _fg(k=3, n=30, f=12, c=3, seed=0) -> FederatedGraph:
    g = torch.Generator().manual_seed(seed)
    clients = []
    for i in range(k):
        y = torch.arange(n) % c
        src = torch.randint(0, n, (40,), generator=g)
        dst = torch.randint(0, n, (40,), generator=g)
        keep = src != dst
        ei = torch.cat([torch.stack([src[keep], dst[keep]]), torch.stack([dst[keep], src[keep]])], 1)
        split = torch.arange(n) % 5
        clients.append(ClientGraph(i, torch.arange(i * n, (i + 1) * n), ei, torch.rand(n, f, generator=g), y,
                                   split == 0, (split == 1) | (split == 2), split >= 3))
    return FederatedGraph("synthetic", None, clients, c, {"scheme": "louvain"})


def _local(fg, seeds=(1, 2), hidden=8) -> LocalModels:
    """Local models = W0 + random updates (no training needed for the views)."""
    w0 = [init_params(fg.num_features, fg.num_classes, hidden, s) for s in seeds]
    g = torch.Generator().manual_seed(7)
    params = {n: torch.stack([w[n] + 0.1 * torch.randn(w[n].shape, generator=g) for w in w0
                              for _ in range(fg.num_clients)]) for n in w0[0]}
    curves = pd.DataFrame({"model": np.tile(np.arange(len(seeds) * fg.num_clients), 5),
                           "epoch": np.repeat(np.arange(5), len(seeds) * fg.num_clients)})
    curves["loss"] = 1.0 / (1 + curves["epoch"])
    curves["train_acc"] = 0.5 + 0.1 * curves["epoch"]
    return LocalModels(tuple(seeds), fg.num_clients, w0, params, TrainConfig(hidden=hidden), curves)


def _labelled(fig, i=0) -> None:
    """A figure is titled and its ticked data axes carry x and y labels (grids label the
    outer panels only; embedding panels such as UMAP hide their ticks and need none)."""
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"
             and (ax.lines or ax.collections or ax.patches or ax.images)]
    assert drawn, f"figure {i} draws nothing"
    ticked = [ax for ax in drawn if len(ax.get_xticks())]
    if ticked:
        assert any(ax.get_xlabel() for ax in ticked) and any(ax.get_ylabel() for ax in ticked), f"figure {i}"
    assert fig.get_suptitle() or any(ax.get_title() for ax in drawn), f"figure {i} has no title"
    assert figure_problems(fig) == [], f"figure {i}"


# ----------------------------------------------------------------------------- style, saving
def test_method_colours_are_fixed_and_stable():
    from pace_nb.viz.style import palette

    assert plots.method_color("PACE") == plots.method_color("pace") == palette()["pace"] == "#D55E00"
    assert plots.method_color("brand-new") == plots.method_color("brand-new")
    assert plots.method_palette(["local", "pace"]) == {"local": palette()["local"], "pace": palette()["pace"]}
    assert plots.method_marker("FedAvg") == plots.method_marker("fedavg") != plots.method_marker("fedprox")


def test_save_figure_writes_png_and_pdf(tmp_path):
    plots.set_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    paths = plots.save_figure(fig, "demo_fig", tmp_path / "out")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ConfigError, match="plain file stem"):
        plots.save_figure(fig, "../escape", tmp_path)
    with pytest.raises(ConfigError, match="formats"):
        plots.save_figure(fig, "x", tmp_path, formats=("jpg",))


def test_missing_columns_and_empty_frames_are_clear_errors():
    with pytest.raises(ConfigError, match="needs columns split"):
        plots.plot_partition(pd.DataFrame({"client": [0], "class": [0], "count": [1]}))
    with pytest.raises(ConfigError, match="empty"):
        plots.plot_alpha_paths(pd.DataFrame(columns=["receiver", "alpha", "val_nll", "val_acc", "test_acc"]))


# ----------------------------------------------------------------------------- views (math)
def test_partition_frame_counts_every_node_once():
    fg = _fg()
    parts = views.partition_frame(fg)
    assert parts["count"].sum() == sum(c.num_nodes for c in fg.clients)
    c0 = parts[(parts.client == 0) & (parts.split == "train")]
    assert c0["count"].tolist() == torch.bincount(fg.clients[0].y[fg.clients[0].train_mask], minlength=3).tolist()


def test_curves_frame_maps_seed_major_models():
    fg = _fg()
    local = _local(fg)
    cur = views.curves_frame(local)
    row = cur[cur["model"] == 4].iloc[0]  # b = s*K + k = 1*3 + 1
    assert (row["seed"], row["client"]) == (2, 1)


def test_curves_frame_keeps_old_curves_working_with_a_val_acc_column():
    local = _local(_fg())
    assert "val_acc" not in local.curves.columns and views.curves_frame(local)["val_acc"].isna().all()
    fig = plots.plot_training_curves(views.curves_frame(local))
    assert len(fig.axes) == 2  # no validation accuracy recorded: the two training panels only


def test_training_curves_draw_validation_accuracy_and_its_plateau():
    local = _local(_fg())
    local.curves["val_acc"] = np.minimum(0.2 + 0.2 * local.curves["epoch"], 0.75)  # 20, 40, 60, 75, 75 %
    fig = plots.plot_training_curves(views.curves_frame(local))
    assert len(fig.axes) == 3 and "validation accuracy" in fig.axes[2].get_ylabel()
    assert "dropout on" in fig.axes[2].get_ylabel()
    mean = fig.axes[2].lines[-2]  # the mean over clients, then the plateau marker
    assert np.allclose(mean.get_ydata(), [20, 40, 60, 75, 75])
    assert list(fig.axes[2].lines[-1].get_xdata()) == [3, 3]  # first epoch within 1 point of the peak
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("by epoch 3" in t and "of 75.0 %" in t for t in texts)
    assert figure_problems(fig) == []


def test_delta_spectra_and_rank_energy_match_numpy():
    fg = _fg()
    local = _local(fg)
    spec = views.delta_spectra(local, s=1)
    d = (local.params["conv1.weight"][3 + 2] - local.init[1]["conv1.weight"]).double().numpy()
    sv = np.linalg.svd(d, compute_uv=False)
    got = spec[(spec.param == "conv1.weight") & (spec.client == 2)].sort_values("index")["sigma"].to_numpy()
    np.testing.assert_allclose(got, sv, rtol=1e-6)
    en = views.rank_energy(spec, [2])
    u, s, vt = np.linalg.svd(d)
    approx = (u[:, :2] * s[:2]) @ vt[:2]
    kept = 1 - np.linalg.norm(d - approx) ** 2 / np.linalg.norm(d) ** 2
    assert en[(en.param == "conv1.weight") & (en.client == 2)]["energy"].item() == pytest.approx(kept, rel=1e-6)


def test_consensus_frame_regmean_matches_formula():
    fg = _fg()
    local = _local(fg)
    cons = views.consensus_frame(fg, local, s=0, rank=0)
    sk = views.sketch_frame(fg, local, s=0)
    name = "conv2.weight"
    c = sk[sk.param == name].pivot(index="client", columns="column", values="c").to_numpy()
    deltas = np.stack([(local.model(0, k)[name] - local.init[0][name]).numpy() for k in range(3)])
    reg = (deltas * c[:, None, :]).sum(0) / c.sum(0)[None, :]
    f = cons[cons.param == name].sort_values("column")
    np.testing.assert_allclose(f["regmean"], np.linalg.norm(reg, axis=0), rtol=1e-5)
    np.testing.assert_allclose(f["mean"], np.linalg.norm(deltas.mean(0), axis=0), rtol=1e-5)
    np.testing.assert_allclose(f["weight"], c.sum(0), rtol=1e-5)


def _logits(k=2, n=20, c=3):
    g = torch.Generator().manual_seed(3)
    zl = [torch.randn(n, c, generator=g) for _ in range(k)]
    ze = [z + torch.randn(n, c, generator=g) for z in zl]
    y = [torch.arange(n) % c for _ in range(k)]
    vm = [torch.arange(n) % 2 == 0 for _ in range(k)]
    return views.ReceiverLogits(zl, ze, y, vm, [~m for m in vm], {0: 0.25, 1: 1.0})


def test_alpha_paths_and_blend_predictions():
    lg = _logits()
    paths = views.alpha_paths(lg, num=11)
    assert sorted(paths.receiver.unique()) == [0, 1] and len(paths) == 22
    r0 = paths[(paths.receiver == 0) & (paths.alpha == 0)].iloc[0]
    tm = lg.test_mask[0]
    assert r0["test_acc"] == pytest.approx(float((lg.z_local[0][tm].argmax(1) == lg.y[0][tm]).float().mean()))
    assert torch.equal(lg.blend_predictions(1, 0.0), lg.z_local[1].argmax(-1))
    assert torch.equal(lg.blend_predictions(1, 1.0), lg.z_external[1].argmax(-1))


def test_alpha_utilisation_frame_and_sweep_frame():
    rows = make_rows(num_clients=3)
    util = views.alpha_utilisation_frame(rows)
    assert util[["alpha_mean", "alpha_zero_frac", "upload_ratio", "return_ratio"]].iloc[0].tolist() == [0.5, 0.0, 12.0, 10.0]
    sw = pd.DataFrame({"swept": ["gamma", "gamma", "T"], "gamma": [0.1, 1.0, 0.1], "T": [2, 2, 4],
                       "acc": [80.0, 81.0, 79.0], "dataset": "Cora"})
    out = views.sweep_frame(sw)
    assert out[["param", "value"]].values.tolist() == [["gamma", 0.1], ["gamma", 1.0], ["T", 4.0]]
    with pytest.raises(ConfigError, match="swept"):
        views.sweep_frame(sw.drop(columns="swept"))


# ----------------------------------------------------------------------------- every figure renders
def test_pace_figures_render_labelled():
    fg = _fg()
    local = _local(fg)
    rows = pd.concat([make_rows("Cora", methods={("local", "native", 0): 0.0, **{("pace", "full", r): 1.0 + r / 10
                                                                               for r in (2, 6, 0)}}),
                      make_rows("demo", methods={("pace", "full", 6): 2.0})])
    from pace_nb.analysis import diagnostics

    rep = diagnostics.diagnostics_report(make_rows("Cora"))
    util = views.alpha_utilisation_frame(rows)
    paper = pd.DataFrame({"dataset": ["Cora"], "metric": ["alpha_mean"], "value": [0.655]})
    lg = _logits()
    figs = [plots.plot_partition(views.partition_frame(fg)), plots.plot_training_curves(views.curves_frame(local)),
            plots.plot_client_accuracy(rows, ("local", "pace")),
            plots.plot_singular_spectra(views.delta_spectra(local), rank=2),
            plots.plot_sketch_moments(views.sketch_frame(fg, local)),
            plots.plot_consensus_compare(views.consensus_frame(fg, local)),
            plots.plot_rank_study(rows), plots.plot_alpha_paths(views.alpha_paths(lg, 11), lg.alpha_star),
            plots.plot_alpha_utilisation(util, paper), plots.plot_paired_differences(rep["paired"]),
            plots.plot_harm_units(rep["harm"], rep["receivers"]), plots.plot_receiver_means(rep["receivers"])]
    for i, fig in enumerate(figs):
        _labelled(fig, i)


def test_rank_study_places_dense_last_and_reads_percent():
    rows = make_rows("Cora", methods={("pace", "full", r): 1.0 for r in (2, 6, 0)})
    fig = plots.plot_rank_study(rows)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "6", "dense"]
    comm = fig.axes[-1]
    assert comm.lines[0].get_ydata().tolist() == [12.0, 12.0, 12.0]  # percent, not ×100


def test_spear_figures_render():
    rng = np.random.default_rng(0)
    coords = pd.DataFrame({"representation": np.repeat(["raw", "fedavg"], 50), "x": rng.normal(size=100),
                           "y": rng.normal(size=100), "label": rng.integers(0, 3, 100), "client": rng.integers(0, 4, 100)})
    protos = pd.DataFrame({"kind": ["local"] * 6 + ["global"] * 3, "x": rng.normal(size=9), "y": rng.normal(size=9),
                           "label": [0, 1, 2, 0, 1, 2, 0, 1, 2]})
    sweeps = pd.DataFrame({"param": ["gamma"] * 3 + ["T"] * 3, "value": [0.01, 0.1, 1, 0, 1, 2],
                           "acc": [70, 71, 72, 60, 65, 70], "variant": "full"})
    table = pd.DataFrame({"table": ["1", "1", "3", "3", "10"], "metric": ["acc", "acc", "upload_pct", "alpha_mean", "f1_macro"],
                          "ours": [79.0, 64.0, 12.0, 0.64, 50.0], "paper": [79.2, 65.4, 12.1, 0.655, 52.0],
                          "label": ["1: a / Cora", "1: b / Cora", "3: Cora / Upload (%)", "3: Cora / Mean α", "10: c / Cora"]})
    figs = [spear_plots.plot_umap_panels(coords, {"raw": 0.1, "fedavg": -0.2}),
            spear_plots.plot_silhouettes(pd.DataFrame({"representation": ["raw", "fedavg"], "silhouette": [0.1, -0.3]})),
            spear_plots.plot_prototypes(coords[coords.representation == "raw"], protos, {"local": 0.32, "global": 0.2}),
            spear_plots.plot_sweeps(sweeps, hue="variant")] + [spear_plots.plot_ours_vs_paper(table, u)
                                                               for u in spear_plots.UNITS]
    assert "silhouette +0.100" in figs[0].axes[0].get_title()
    assert figs[3].axes[0].get_xscale() == "log"
    for i, fig in enumerate(figs):
        _labelled(fig, i)


# ----------------------------------------------------------------------------- widgets
def test_widgets_degrade_to_static_headless(capsys):
    lg = _logits()
    paths = views.alpha_paths(lg, 11)
    assert not widgets.widgets_available()
    assert widgets.alpha_explorer(lg, paths, interactive=True) is None
    assert "static figure only" in capsys.readouterr().out
    rows = make_rows("Cora", methods={("local", "native", 0): 0.0, **{("pace", "full", r): 1.0 for r in (2, 6)}})
    rows = rows.assign(bytes_up=1000.0, bytes_down=800.0)
    assert widgets.rank_explorer(rows, interactive=False) is None
    fg = _fg()
    assert widgets.client_explorer(views.partition_frame(fg), views.curves_frame(_local(fg)), rows) is None


def test_widget_figures_check_inputs_and_compute():
    lg = _logits()
    paths = views.alpha_paths(lg, 11)
    fig = widgets.alpha_view_figure(lg, paths, 0, 0.0)
    assert "0 changed vs Local" in fig.axes[1].get_title()
    with pytest.raises(ConfigError, match="receiver 5"):
        widgets.alpha_view_figure(lg, paths, 5, 0.5)
    with pytest.raises(ConfigError, match="alpha"):
        widgets.alpha_view_figure(lg, paths, 0, 1.5)
    rows = make_rows("Cora", num_clients=4, methods={("pace", "full", 6): 1.0})
    rows.loc[rows.receiver < 0, "bytes_up"] = 4000.0
    rows.loc[rows.receiver < 0, "bytes_down"] = 2000.0
    tab = widgets.rank_table(rows)
    assert tab[["bytes_up", "bytes_down"]].iloc[0].tolist() == [1000.0, 500.0]  # per client = total / K
    with pytest.raises(ConfigError, match="rank 4 was not run"):
        widgets.rank_view_figure(rows, 4)
    with pytest.raises(ConfigError, match="client 9"):
        widgets.client_view_figure(views.partition_frame(_fg()), None, None, 9)


def test_with_store_adds_other_datasets_only(results_tmp):
    from pace_nb.experiments.store import ResultsStore

    ResultsStore().append(pd.concat([make_rows("Cora", num_clients=3), make_rows("CiteSeer", num_clients=3),
                                     make_rows("PubMed", num_clients=5)]))
    own = make_rows("Cora", num_clients=3, base=50.0)
    out = views.with_store(own, None, partition="louvain", num_clients=3)
    assert sorted(out["dataset"].unique()) == ["CiteSeer", "Cora"]
    assert out[out.dataset == "Cora"]["acc"].min() < 60  # the notebook's own Cora rows win
    assert len(out) == len(own) + len(make_rows("CiteSeer", num_clients=3))
    labels = plots._setting_labels(pd.DataFrame({"dataset": ["Cora", "Cora"], "num_clients": [5, 10]}))
    assert labels == ["Cora (num_clients=5)", "Cora (num_clients=10)"]


def test_ours_vs_paper_from_table_comparisons():
    from pace_nb.analysis import tables

    rows = make_rows("Cora", num_clients=10)
    pairs = views.ours_vs_paper(tables.build_tables(rows, "1"))
    assert len(pairs) and pairs["ours"].dtype.kind == "f" and pairs["paper"].dtype.kind == "f"
    assert (pairs["diff"] - (pairs["ours"] - pairs["paper"])).abs().max() < 1e-9
    assert (pairs["table"] == "1").all() and pairs["label"].str.startswith("1: ").all()
    assert views.ours_vs_paper(tables.build_tables(None, "1")).empty  # nothing run, nothing drawn
    spear_plots.plot_ours_vs_paper(pairs)


def test_rows_for_tables_policy(results_tmp):
    from pace_nb.experiments.store import ResultsStore

    calls = []

    def runner(dataset, **kw):
        calls.append((dataset, kw))
        return make_rows(dataset, num_clients=10)

    rows, source = views.rows_for_tables(None, fill_empty=False, dataset="Cora", runner=runner)
    assert rows.empty and "store is empty" in source and not calls  # never runs anything unasked
    rows, source = views.rows_for_tables(None, fill_empty=True, dataset="Cora", runner=runner, seeds=(1,))
    assert calls == [("Cora", {"progress": False, "seeds": (1,)})] and "in-memory" in source
    assert len(rows) == len(make_rows("Cora", num_clients=10))
    ResultsStore().append(make_rows("demo", num_clients=3))
    rows, source = views.rows_for_tables(None, fill_empty=True, dataset="Cora", runner=runner)
    assert sorted(rows["dataset"].unique()) == ["Cora", "demo"] and len(calls) == 2
    rows, source = views.rows_for_tables(None, fill_empty=True, dataset="demo", runner=runner)
    assert len(calls) == 2 and "in-memory" not in source  # stored rows for the dataset: store only


def test_reproduction_figures_from_table_comparisons():
    """Accuracy vs K (Tables 1/8/9) and SPEAR Tab. 1 bars, from build_tables' comparisons."""
    from pace_nb.analysis import tables
    from pace_nb.viz import reproduction as repro

    rows = pd.concat([make_rows(dataset="Cora", num_clients=k, base=80.0 - k / 10, receivers=False) for k in (10, 20)])
    comps = tables.build_tables(rows, ["1", "8", "9", "spear-1"])
    frame = repro.scaling_frame(comps)
    local = frame[(frame.dataset == "Cora") & (frame.method == "local")].set_index("num_clients")
    mean = 80.0 + 0.1 * np.mean(make_rows().seed.unique())  # make_rows: acc = base + offset + 0.1·seed
    assert local.loc[10, "ours"] == pytest.approx(mean - 1.0) and local.loc[20, "ours"] == pytest.approx(mean - 2.0)
    from pace_nb.analysis.paper_values import paper_values

    t9 = paper_values("pace", table="9")
    want = t9[(t9.dataset == "Cora") & (t9.method == "local") & (t9.metric == "acc")].value.iloc[0]
    assert np.isnan(local.loc[30, "ours"]) and local.loc[30, "paper"] == want  # K = 30 not run: paper only
    assert set(frame.method) <= {"local", "pace", "fedavg", "fedpub"}
    fig = repro.plot_client_scaling(frame)
    shown = [a for a in fig.axes if a.get_visible() and a.get_title()]
    assert [a.get_title() for a in shown][:2] == ["Cora", "CiteSeer"]  # the paper's scope, in its order
    said = {a.get_title(): [t.get_text() for t in a.texts] for a in shown}
    assert said["Cora"] == [] and all(v == ["not run"] for k, v in said.items() if k != "Cora")
    assert shown[0].get_ylabel() == "accuracy (%)" and any(a.get_xlabel() == "clients K" for a in shown)
    assert figure_problems(fig) == []
    with pytest.raises(ConfigError, match="no entries run"):
        repro.plot_spear_comparison(repro.comparison_frame(comps))  # no SPEAR comparison rows yet
    spear = pd.DataFrame([dict(dataset=d, partition="dirichlet", beta=0.05, num_clients=10, seed=s, method=m,
                               variant="full" if m == "spear" else "native", rank=0, receiver=-1, acc=acc + s,
                               params='{"evaluation": "complete_graph"}')
                          for d in ("CiteSeer", "Cora") for s in (0, 1) for m, acc in (("spear", 70.0), ("oasis", 60.0))])
    sc = repro.comparison_frame(tables.build_tables(spear, ["spear-1"]))
    assert sc.set_index(["dataset", "method"]).loc[("Cora", "spear"), "ours"] == pytest.approx(70.5)
    fig = repro.plot_spear_comparison(sc)
    assert [a.get_title() for a in fig.axes] == ["Cora (2 seeds)", "CiteSeer (2 seeds)"]  # registry order
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["SPEAR", "OASIS"]  # best first
    assert all(len(a.texts) == 0 for a in fig.axes)
    fig = repro.plot_spear_comparison(repro.comparison_frame(tables.build_tables(
        spear[~((spear.dataset == "CiteSeer") & (spear.method == "oasis"))], ["spear-1"])))
    said = {a.get_title(): [t.get_text() for t in a.texts] for a in fig.axes}
    assert said == {"Cora (2 seeds)": [], "CiteSeer (2 seeds)": ["not run"]}  # OASIS has no CiteSeer rows


def test_client_accuracy_figure_is_the_same_every_time(tmp_path):
    """Seaborn's strip-plot jitter draws from numpy's global generator: fixed, and restored after."""
    from pace_nb.viz.style import save_figure

    rows = make_rows(receivers=True)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    figs = [plots.plot_client_accuracy(rows, ("local", "pace")) for _ in range(2)]
    assert (np.random.get_state()[1] == before).all()  # the caller's generator is left as it was
    paths = [save_figure(f, f"c{i}", tmp_path, formats=("png",))[0] for i, f in enumerate(figs)]
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_sweeps_per_panel_hue_error_bars_and_paper_setting():
    """β panel by variant, a panel by dataset (SPEAR Fig. 4a/4b); seeds → mean ± sample sd error bars."""
    acc = {"Cora": [70.0, 72.0, 74.0], "Texas": [60.0, 50.0, 40.0]}
    rows = [{"param": "beta", "value": b, "acc": 70.0 + s, "variant": v, "dataset": "Cora", "num_clients": 10,
             "seed": 2024 + s} for b in (0.05, 0.25) for v in ("full", "no_ppr") for s in range(3)]
    rows += [{"param": "a", "value": v, "acc": acc[d][s] + 10 * v, "variant": "full", "dataset": d,
              "num_clients": 10 if d == "Cora" else 6, "seed": 2024 + s}
             for d in acc for v in (0.0, 0.5) for s in range(3)]
    fig = spear_plots.plot_sweeps(pd.DataFrame(rows), hue={"beta": "variant", "a": "dataset"},
                                  defaults={"beta": 0.05, "a": 0.5})
    _labelled(fig)
    ax_a = fig.axes[1]
    from matplotlib.colors import same_color

    texas = [c for c in ax_a.containers if same_color(c.lines[0].get_color(), spear_plots._SERIES_COLORS[1])]
    assert len(texas) == 1, [c.lines[0].get_color() for c in ax_a.containers]
    texas = texas[0]
    assert list(texas.lines[0].get_ydata()) == pytest.approx([50.0, 55.0])
    seg = texas.lines[2][0].get_segments()[0]  # the error bar at a = 0: mean ± sample sd of 60, 50, 40
    assert (seg[1][1] - seg[0][1]) / 2 == pytest.approx(np.std([60, 50, 40], ddof=1))
    beta_legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]  # in the β panel
    assert beta_legend == ["SPEAR", "w/o PPR", "paper's setting"]
    assert [[t.get_text() for t in lg.get_texts()] for lg in fig.legends] == [["Cora (K = 10)", "Texas (K = 6)"]]
    assert [lg.get_title().get_text() for lg in fig.legends] == ["a panel"]
    assert fig.axes[0].get_title().startswith("Cora: ")
    assert any(ln.get_xdata()[0] == 0.5 and ln.get_linestyle() == ":" for ln in ax_a.lines)
    assert "3 data seeds" in fig.get_suptitle()


def test_plots_draw_into_the_callers_axes():
    """A ``plot_*`` given ``ax`` draws there (the caller's figure, nothing new opened); a panel count
    that does not match is a clear error; every fixed-layout plot takes ``ax``."""
    import inspect

    from pace_nb.viz import harm, reproduction

    rows = make_rows("Cora", num_clients=3, base=50.0)
    fig, (left, right) = plt.subplots(1, 2)
    before = len(plt.get_fignums())
    got = plots.plot_client_accuracy(rows, ("local", "pace"), ax=left)
    assert got is fig and len(plt.get_fignums()) == before and left.get_ylabel() == "test accuracy (%)"
    assert not right.has_data()
    got = spear_plots.plot_silhouettes(pd.DataFrame({"representation": ["raw"], "silhouette": [0.2]}), ax=right)
    assert got is fig and right.patches
    with pytest.raises(ConfigError, match="draws 1 × 2 panel"):
        plots.plot_training_curves(pd.DataFrame({"client": [0], "epoch": [1], "loss": [1.0], "train_acc": [0.5]}),
                                   ax=left)
    other = plt.figure().add_subplot()
    with pytest.raises(ConfigError, match="one figure"):
        plots.plot_training_curves(pd.DataFrame({"client": [0], "epoch": [1], "loss": [1.0], "train_acc": [0.5]}),
                                   ax=[left, other])
    data_dependent = {"plot_sweeps", "plot_receiver_means", "plot_client_scaling", "plot_spear_comparison"}
    for mod in (plots, spear_plots, harm, reproduction):
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.startswith("plot_") and fn.__module__ == mod.__name__ and name not in data_dependent:
                assert "ax" in inspect.signature(fn).parameters, name
    plt.close("all")
