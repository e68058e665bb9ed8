"""Ablation figures, ours beside the paper's, drawn from :func:`pace_nb.analysis.tables.comparison`
frames (``row, col, dataset, num_clients, variant, metric, paper_mean, ours_mean, ours_std, n_seeds``):

* :func:`plot_variants` — PACE Table 2 (the consensus / return components, rank 6, K = 10);
* :func:`plot_resolver` — PACE Table 6 (Transport alone against Transport + CNLL, every K);
* :func:`plot_robustness` — SPEAR Tab. 2 (accuracy drop under edge / feature perturbation).

Ours: a dot with ± sample sd over seeds; the paper's value: ×; a dataset of the paper's scope
without results: "not run"; each panel's title says how many seeds.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pace_nb.data.datasets import dataset_order
from pace_nb.viz.style import FULL, ROW, method_color, method_marker, not_run, panel_grid, require_columns

_COLS = ["row", "dataset", "variant", "metric", "paper_mean", "ours_mean", "ours_std", "n_seeds"]
PAPER_MARK = {"marker": "x", "color": "k", "s": 30, "lw": 1.3, "zorder": 5}


def _datasets(frame: pd.DataFrame) -> list[str]:
    return sorted(dict.fromkeys(frame["dataset"]), key=dataset_order)


def seeds_title(name: str, n) -> str:
    """``"Cora (5 seeds)"``; a panel without results: the name only."""
    n = int(n) if n == n and n else 0
    return f"{name} ({n} seed{'s' if n != 1 else ''})" if n else name


def zoom_limits(values, spread: float) -> tuple[float, float]:
    """Axis limits around the values within ``spread`` of the largest (what the ablation is about);
    values further below are drawn at the left edge (:func:`mark_clipped`)."""
    v = np.asarray([x for x in values if x == x], dtype=float)
    top = float(v.max())
    kept = v[v >= top - spread]
    lo, hi = float(kept.min()), top
    pad = max(0.15 * (hi - lo), 0.3)
    return lo - pad, hi + pad


def mark_clipped(ax, value: float, y: float, text: str, side: str = "left") -> None:
    """A value outside the zoomed axis: a triangle at the axis edge and its number."""
    lo, hi = ax.get_xlim()
    x, marker, ha, off = (lo, "<", "left", 7) if side == "left" else (hi, ">", "right", -7)
    ax.plot([x], [y], marker=marker, color="0.3", ms=6, clip_on=False, zorder=6)
    ax.annotate(text, (x, y), xytext=(off, 0), textcoords="offset points", ha=ha, va="center", fontsize="small",
                color="0.2")


def _variant_key(method: str, variant: str) -> str:
    return method if variant in ("native", "full") else variant


def plot_variants(comp: pd.DataFrame, spread: float = 10.0, ncols: int = 3, title: str = "") -> plt.Figure:
    """PACE Table 2: every row of the table (Local, Transport, Fixed α = 0.5, Mean / Raw / Direct
    + CNLL, Full PACE) per dataset, pooled accuracy; each panel's axis zoomed to the values within
    ``spread`` points of its best, a value further below marked at the left edge with its number."""
    require_columns(comp, _COLS + ["method"], "plot_variants")
    datasets = _datasets(comp)
    rows = list(dict.fromkeys(comp["row"]))
    fig, axes = panel_grid(len(datasets), ncols, width=FULL, height=0.3 * len(rows) + 1.3, sharey=True)
    y = {r: len(rows) - 1 - i for i, r in enumerate(rows)}
    for ax, d in zip(axes, datasets, strict=True):
        g = comp[comp["dataset"] == d]
        ax.set_yticks(list(y.values()), list(y))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ran = g.dropna(subset=["ours_mean"])
        if ran.empty:
            ax.scatter(g["paper_mean"], g["row"].map(y), **PAPER_MARK)
            not_run(ax)
            ax.set(title=d, xlabel="pooled accuracy (%)")
            continue
        ax.set_xlim(*zoom_limits(pd.concat([ran["ours_mean"], g["paper_mean"]]), spread))
        lo = ax.get_xlim()[0]
        for _, e in g.iterrows():
            key, yi = _variant_key(e["method"], e["variant"]), y[e["row"]]
            if e["ours_mean"] == e["ours_mean"] and e["ours_mean"] >= lo:
                ax.errorbar(e["ours_mean"], yi, xerr=0 if e["ours_std"] != e["ours_std"] else e["ours_std"],
                            fmt=method_marker(key), color=method_color(key), ms=5, capsize=2, zorder=4)
            if e["paper_mean"] == e["paper_mean"] and e["paper_mean"] >= lo:
                ax.scatter([e["paper_mean"]], [yi], **PAPER_MARK)
            low = [f"{w} {v:.1f}" for w, v in (("ours", e["ours_mean"]), ("paper", e["paper_mean"])) if v == v and v < lo]
            if low:
                mark_clipped(ax, lo, yi, ", ".join(low))
        ax.set(title=seeds_title(d, ran["n_seeds"].max()), xlabel="pooled accuracy (%)")
    handles = [plt.Line2D([], [], marker="o", ls="", color="0.35"), plt.Line2D([], [], marker="x", ls="", color="k"),
               plt.Line2D([], [], marker="<", ls="", color="0.3")]
    fig.legend(handles, ["ours (± sd over seeds)", "paper (Table 2)", "below the axis: its value"],
               loc="outside lower center", ncols=3, fontsize="small")
    fig.suptitle(title or "PACE Table 2: component ablation at rank 6, Louvain K = 10 (axes zoomed to the differences)")
    return fig


def plot_resolver(comp: pd.DataFrame, metric: str = "acc", ncols: int = 3, title: str = "") -> plt.Figure:
    """PACE Table 6: Transport alone (α = 1) against Transport + CNLL (full PACE) over K per
    dataset: ours as lines with ± sd bars, the paper's values as × in the same colour."""
    require_columns(comp, _COLS + ["num_clients"], "plot_resolver")
    f = comp[comp["metric"] == metric]
    datasets = _datasets(f)
    fig, axes = panel_grid(len(datasets), ncols, width=FULL, height=ROW)
    series = {"transport": "Transport (α = 1)", "full": "Transport + CNLL (PACE)"}
    colour = {"transport": method_color("transport"), "full": method_color("pace")}
    marker = {"transport": method_marker("transport"), "full": method_marker("pace")}
    for i, (ax, d) in enumerate(zip(axes, datasets, strict=True)):
        g = f[f["dataset"] == d]
        for v in series:
            s = g[g["variant"] == v].sort_values("num_clients")
            run = s.dropna(subset=["ours_mean"])
            if len(run):
                ax.errorbar(run["num_clients"], run["ours_mean"], yerr=run["ours_std"].fillna(0), color=colour[v],
                            marker=marker[v], ms=4, lw=1.3, capsize=2)
            ax.scatter(s["num_clients"], s["paper_mean"], marker="x", color=colour[v], s=30, lw=1.3, zorder=5)
        if g["ours_mean"].isna().all():
            not_run(ax)
        ax.set(title=seeds_title(d, g["n_seeds"].max()), xticks=sorted(f["num_clients"].unique()),
               xlabel="clients K" if i >= len(datasets) - ncols else "", ylabel="accuracy (%)" if i % ncols == 0 else "")
    handles = [plt.Line2D([], [], color=colour[v], marker=marker[v]) for v in series]
    handles.append(plt.Line2D([], [], marker="x", ls="", color="k"))
    fig.legend(handles, [*series.values(), "paper (Table 6), in the series' colour"], loc="outside lower center",
               ncols=3, fontsize="small")
    fig.suptitle(title or "PACE Table 6: the CNLL resolver on top of transport, Louvain (ours ± sd, × paper)")
    return fig


_PERTURBATIONS = {"edge_noise": ("edges", "mixed edge addition / deletion, ρ = 0.5"),
                  "feature_noise": ("features", "feature zero-masking, η = 0.5")}


def plot_robustness(comp: pd.DataFrame, title: str = "") -> plt.Figure:
    """SPEAR Tab. 2: accuracy drop (clean − perturbed, points, paired by data seed) per dataset
    under each perturbation, ± sd over data seeds; the paper's bound over its datasets ("within
    0.6 / 1.0 %") as a dashed line; datasets of the table's scope without results: "not run"."""
    require_columns(comp, _COLS, "plot_robustness")
    per = comp[comp["dataset"] != "all"]
    bound = comp[comp["dataset"] == "all"].set_index("variant")["paper_mean"]
    datasets = _datasets(per)[::-1]
    fig, axes = panel_grid(2, 2, width=FULL, height=0.32 * len(datasets) + 1.2, sharey=True)
    y = np.arange(len(datasets))
    colour = method_color("spear")
    for ax, (v, (short, what)) in zip(axes, _PERTURBATIONS.items(), strict=True):
        g = per[per["variant"] == v].set_index("dataset").reindex(datasets)
        ran = g["ours_mean"].notna().to_numpy()
        ax.barh(y[ran], g["ours_mean"][ran], xerr=g["ours_std"][ran].fillna(0), color=colour, height=0.6,
                error_kw={"lw": 0.8, "capsize": 2})
        for yi in y[~ran]:
            ax.text(0.02, yi, "not run", transform=ax.get_yaxis_transform(), va="center", fontsize="small",
                    fontstyle="italic", color="0.35")
        if v in bound.index and bound[v] == bound[v]:
            ax.axvline(bound[v], color="k", ls="--", lw=1)
            ax.text(bound[v], len(datasets) - 0.4, f" paper: within {bound[v]:g}", fontsize="small", va="bottom")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(y, datasets)
        ax.set_ylim(-0.6, len(datasets) + 0.2)
        ax.set(title=f"{short}: {what}", xlabel="accuracy drop (points)")
        ax.title.set_fontsize("small")
    seeds = per["n_seeds"].max()
    fig.suptitle(title or f"SPEAR Tab. 2: robustness, Dirichlet β = 0.05, K = 10 "
                          f"({int(seeds) if seeds == seeds else 0} data seeds; bar ± sd)")
    return fig
