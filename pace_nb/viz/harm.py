"""PACE Fig. 4 and App. A figures: seed-paired differences, helped / tied / harmed units and
per-receiver means, in the :mod:`pace_nb.viz.style` style (re-exported by :mod:`pace_nb.viz.pace`)."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist

from pace_nb.core.schema import OUTCOME_COLORS
from pace_nb.data.datasets import dataset_order
from pace_nb.viz.style import COLUMN, FULL, ROW, method_color, panel_grid as _grid, require_columns as _require, subplots


def _datasets(values) -> list[str]:
    return sorted(dict.fromkeys(values), key=dataset_order)


def _in_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the papers' dataset order (stable within a dataset)."""
    keys = [dataset_order(d) for d in frame["dataset"]]
    return frame.iloc[sorted(range(len(frame)), key=lambda i: keys[i])].reset_index(drop=True)


def _setting_labels(frame: pd.DataFrame) -> list[str]:
    """Dataset names, with the setting (partition, K, β) added where a dataset repeats."""
    labels = frame["dataset"].astype(str).tolist()
    keys = [c for c in ("partition", "num_clients", "beta") if c in frame.columns]
    if len(set(labels)) == len(labels) or not keys:
        return labels
    return [f"{d} ({', '.join(f'{k}={v}' for k, v in zip(keys, r, strict=True) if v == v)})"
            for d, r in zip(labels, frame[keys].itertuples(index=False), strict=True)]


def plot_paired_differences(paired: pd.DataFrame, metrics: Sequence[str] = ("acc", "f1_weighted"),
                            title: str = "", ax=None) -> plt.Figure:
    """PACE Fig. 4a–b: mean seed-paired difference with its 95 % t interval per dataset,
    Win/Tie/Loss on the right. ``paired``: :func:`pace_nb.analysis.diagnostics.paired_summary`."""
    _require(paired, ["dataset", "metric", "mean", "ci_low", "ci_high", "wins", "ties", "losses"],
             "plot_paired_differences")
    metrics = [m for m in metrics if m in set(paired["metric"])]
    paired = _in_order(paired)
    fig, axes = subplots(ax, 1, len(metrics), figsize=(FULL, 0.45 * paired["dataset"].nunique() + 1.1), squeeze=False)
    names = {"acc": "accuracy", "f1_weighted": "weighted F1", "f1_macro": "macro F1"}
    for ax, m in zip(axes[0], metrics, strict=True):
        f = paired[paired["metric"] == m].reset_index(drop=True)
        y = np.arange(len(f))[::-1]
        lo = (f["mean"] - f["ci_low"]).fillna(0).clip(lower=0)
        hi = (f["ci_high"] - f["mean"]).fillna(0).clip(lower=0)
        ax.errorbar(f["mean"], y, xerr=[lo, hi], fmt="o", color=method_color("pace"), capsize=3, ms=4)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(y, _setting_labels(f))
        ax.set(xlabel=f"PACE − Local, {names.get(m, m)} (points)", ylabel="dataset" if m == metrics[0] else "",
               title=f"({'ab'[metrics.index(m)]}) {names.get(m, m)}")
        sec = ax.secondary_yaxis("right")
        sec.set_yticks(y, [f"{w}/{t}/{l}" for w, t, l in zip(f["wins"], f["ties"], f["losses"], strict=True)])
        sec.tick_params(length=0, labelsize="small")
        sec.set_ylabel("wins / ties / losses", fontsize="small")
        ax.set_ylim(-0.7, len(f) - 0.3)
    fig.suptitle(title or "seed-paired differences with 95 % paired t intervals (PACE Fig. 4)")
    return fig


def plot_harm_units(harm: pd.DataFrame, worst: pd.DataFrame | None = None, title: str = "", ax=None) -> plt.Figure:
    """PACE Fig. 4c: helped / tied / harmed receiver–seed units per dataset (stacked bars);
    labels give the worst fixed-receiver five-seed mean. ``harm``: ``dataset, helped, tied,
    harmed``; ``worst``: ``dataset, mean_diff`` per receiver (receiver means) or ``worst_mean``."""
    _require(harm, ["dataset", "helped", "tied", "harmed"], "plot_harm_units")
    harm = _in_order(harm)
    fig, ax = subplots(ax, figsize=(COLUMN + 0.8, max(2.0, 0.45 * len(harm) + 1.3)))
    y = np.arange(len(harm))[::-1]
    left = np.zeros(len(harm))
    for k in ("helped", "tied", "harmed"):
        v = harm[k].to_numpy(dtype=float)
        ax.barh(y, v, left=left, color=OUTCOME_COLORS[k], label=k)
        for yi, l, vi in zip(y, left, v, strict=True):
            if vi > 0:
                ax.text(l + vi / 2, yi, f"{int(vi)}", ha="center", va="center", fontsize="small")
        left += v
    labels = _setting_labels(harm)
    if worst is not None and len(worst) and harm["dataset"].is_unique:
        col = "mean_diff" if "mean_diff" in worst.columns else "worst_mean"
        wm = worst.groupby("dataset")[col].min()
        labels = [f"{d} ({wm[d]:+.2f})" if d in wm.index else d for d in harm["dataset"]]
    ax.set_yticks(y, labels)
    ax.set(xlabel="receiver–seed units", ylabel="dataset",
           title=title or "helped / tied / harmed receiver–seed units\n(in brackets: worst fixed-receiver mean, points)")
    fig.legend(fontsize="small", ncols=3, loc="outside lower center")
    return fig


def plot_receiver_means(means: pd.DataFrame, title: str = "") -> plt.Figure:
    """Per-receiver five-seed mean PACE − Local difference (bar) and worst seed (tick),
    per dataset. ``means``: :func:`pace_nb.analysis.diagnostics.receiver_means`."""
    _require(means, ["dataset", "receiver", "mean_diff", "min_diff"], "plot_receiver_means")
    datasets = _datasets(means["dataset"])
    fig, axes = _grid(len(datasets), 3, width=FULL if len(datasets) > 1 else COLUMN + 1, height=ROW)
    for ax, ds in zip(axes, datasets, strict=True):
        f = means[means["dataset"] == ds].sort_values("receiver")
        colours = [OUTCOME_COLORS["helped" if v > 0.01 else "harmed" if v < -0.01 else "tied"] for v in f["mean_diff"]]
        ax.bar(f["receiver"].astype(str), f["mean_diff"], color=colours)
        ax.plot(f["receiver"].astype(str), f["min_diff"], "_", color="k", ms=8)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(title=ds, xlabel="receiver", ylabel="mean PACE − Local (points)")
    handles: list[Artist] = [plt.matplotlib.patches.Patch(color=OUTCOME_COLORS[k]) for k in ("helped", "tied", "harmed")]
    handles.append(plt.Line2D([], [], marker="_", ls="", color="k", ms=8))
    fig.legend(handles, ["helped (> +0.01)", "tied", "harmed (< −0.01)", "worst seed"], fontsize="small", ncols=4,
               loc="outside lower center")
    fig.suptitle(title or "per-receiver seed means of PACE − Local")
    return fig
