"""Figures of the whole reproduction, drawn from the tables' comparisons (no training).

* :func:`scaling_frame` / :func:`plot_client_scaling` — PACE Tables 1, 8, 9: accuracy of each
  method against the number of clients K, ours (mean ± std over seeds) beside the paper's (×).
* :func:`comparison_frame` / :func:`plot_spear_comparison` — SPEAR Tab. 1: every method's
  accuracy per dataset, ours beside the paper's where it gives one.

Inputs are :func:`pace_nb.analysis.tables.build_tables` outputs (``{table id: comparison}``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pace_nb.analysis.spear_comparison import comparison_label
from pace_nb.core.errors import ConfigError
from pace_nb.methods.registry import method_label
from pace_nb.data.datasets import dataset_order
from pace_nb.viz.style import FULL, ROW, method_color, method_marker, not_run, panel_grid

_COLS = ["dataset", "num_clients", "method", "ours", "ours_std", "paper", "n_seeds"]


def _entries(comparisons: Mapping[str, pd.DataFrame], tables: Sequence[str], metric: str) -> pd.DataFrame:
    parts = [comparisons[t] for t in tables if t in comparisons and len(comparisons[t])]
    if not parts:
        return pd.DataFrame(columns=_COLS)
    f = pd.concat(parts, ignore_index=True)
    f = f[(f["metric"] == metric) & (f["variant"].isin(["native", "full"]))]
    return pd.DataFrame({"dataset": f["dataset"], "num_clients": f["num_clients"].astype(int), "method": f["method"],
                         "ours": pd.to_numeric(f["ours_mean"], errors="coerce"),
                         "ours_std": pd.to_numeric(f["ours_std"], errors="coerce"),
                         "paper": pd.to_numeric(f["paper_mean"], errors="coerce"),
                         "n_seeds": pd.to_numeric(f["n_seeds"], errors="coerce")}).reset_index(drop=True)


def scaling_frame(comparisons: Mapping[str, pd.DataFrame], methods: Sequence[str] = ("local", "pace", "fedavg", "fedpub"),
                  metric: str = "acc") -> pd.DataFrame:
    """``dataset, num_clients, method, ours, ours_std, paper, n_seeds`` of PACE Tables 1/8/9."""
    f = _entries(comparisons, ("1", "8", "9"), metric)
    return f[f["method"].isin(methods)].reset_index(drop=True)


def plot_client_scaling(frame: pd.DataFrame, ncols: int = 3, title: str = "") -> plt.Figure:
    """One panel per dataset of the paper's scope (the paper's order): accuracy vs K for each
    method — ours as lines with ± std bars, the paper's values as × in the same colour; a dataset
    with no stored results says "not run" (its paper values still drawn)."""
    ran = frame.dropna(subset=["ours"])
    if ran.empty:
        raise ConfigError("plot_client_scaling: no entries run (run configs/pace_main.toml first)")
    datasets = sorted(set(frame["dataset"]), key=dataset_order)
    methods = list(dict.fromkeys(frame["method"]))
    fig, axes = panel_grid(len(datasets), ncols, width=FULL, height=ROW)
    for i, (ax, d) in enumerate(zip(axes, datasets, strict=True)):
        g = frame[frame["dataset"] == d]
        for m, gm in g.groupby("method", sort=False):
            gm = gm.sort_values("num_clients")
            c = method_color(m)
            run = gm.dropna(subset=["ours"])
            if len(run):
                ax.errorbar(run["num_clients"], run["ours"], yerr=run["ours_std"].fillna(0), color=c,
                            marker=method_marker(m), ms=4, lw=1.4, capsize=2)
            ax.scatter(gm["num_clients"], gm["paper"], marker="x", color=c, s=28, zorder=4)
        if g["ours"].isna().all():
            not_run(ax)
        ax.set(title=d, xlabel="clients K" if i >= len(datasets) - ncols else "",
               ylabel="accuracy (%)" if i % ncols == 0 else "", xticks=sorted(frame["num_clients"].unique()))
    handles = [plt.Line2D([], [], color=method_color(m), marker=method_marker(m)) for m in methods]
    labels = [method_label(m) for m in methods]
    handles.append(plt.Line2D([], [], marker="x", ls="", color="k"))
    labels.append("paper")
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5), fontsize="small")
    fig.suptitle(title or "PACE Tables 1, 8, 9: accuracy vs number of clients (Louvain; ours ± std, × paper)")
    return fig


def comparison_frame(comparisons: Mapping[str, pd.DataFrame], metric: str = "acc") -> pd.DataFrame:
    """``dataset, method, ours, ours_std, paper, n_seeds`` of SPEAR Tab. 1: every entry of its scope
    (ours NaN where not run, so that a dataset never run is drawn as "not run")."""
    return _entries(comparisons, ("spear-1",), metric).drop(columns="num_clients").reset_index(drop=True)


def plot_spear_comparison(frame: pd.DataFrame, ncols: int = 3, title: str = "") -> plt.Figure:
    """Horizontal bars: every method's accuracy per dataset (ours, ± std), the paper's value as ×;
    ``ncols`` panels per row, methods in one order everywhere (best mean accuracy first); a dataset
    of the paper's scope without stored results says "not run"; an entry with fewer seeds than its
    panel's title says how many ("n = k" beside its bar)."""
    ran = frame.dropna(subset=["ours"])
    if ran.empty:
        raise ConfigError("plot_spear_comparison: no entries run (run configs/spear_comparison.toml first)")
    datasets = sorted(set(frame["dataset"]), key=dataset_order)
    methods = ran.groupby("method")["ours"].mean().sort_values(ascending=False).index.tolist()  # best first
    fig, axes = panel_grid(len(datasets), ncols, width=FULL, height=0.22 * len(methods) + 1.4, sharey=True)
    y = np.arange(len(methods))[::-1]
    for ax, d in zip(axes, datasets, strict=True):
        g = frame[frame["dataset"] == d].set_index("method").reindex(methods)
        colors = [method_color(m) for m in methods]
        ax.barh(y, g["ours"].fillna(0), xerr=g["ours_std"].fillna(0), color=colors, height=0.7,
                error_kw={"lw": 0.8, "capsize": 1.5})
        ax.scatter(g["paper"], y, marker="x", color="k", s=22, zorder=4)
        seeds = int(g["n_seeds"].max()) if g["n_seeds"].notna().any() else 0
        if g["ours"].isna().all():
            not_run(ax)
            ax.set(title=d, xlabel="accuracy (%)", xlim=(0, 100))
            continue
        for yi in y[g["ours"].isna().to_numpy()]:  # a method without results on this dataset
            ax.text(1, yi, "not run", va="center", ha="left", fontsize=8, color="0.35", style="italic")
        few = g["ours"].notna() & (g["n_seeds"] < seeds)
        for yi, v, n in zip(y[few.to_numpy()], g.loc[few, "ours"], g.loc[few, "n_seeds"], strict=True):  # fewer seeds
            ax.text(v + 2, yi, f"n = {int(n)}", va="center", ha="left", fontsize=8, color="0.2")
        ax.set(title=f"{d} ({seeds} seed{'s' if seeds != 1 else ''})", xlabel="accuracy (%)", xlim=(0, 100))
    axes[0].set_yticks(y, [comparison_label(m) for m in methods])  # shared y
    paper = "× paper" if frame["paper"].notna().any() else "no paper values in the available text"
    fig.suptitle(title or f"SPEAR Tab. 1: global model on the complete graph\n(Dirichlet β = 0.05, K = 10; ours ± std; {paper})")
    return fig
