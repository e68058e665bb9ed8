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


def _clip_limit(lo: np.ndarray, hi: np.ndarray, means: np.ndarray, factor: float = 2.5) -> float | None:
    """Right axis limit that keeps the other rows readable when one row's mean is more than
    ``factor`` × every other row's interval end (CiteSeer's +7 beside +0.4); None: no clipping."""
    ends = np.maximum(np.abs(lo), np.abs(hi))
    if len(means) < 2:
        return None
    top = int(np.argmax(means))
    rest = np.delete(ends, top)
    if means[top] <= factor * max(float(rest.max()), 1e-9):
        return None
    return 1.3 * float(rest.max())


def plot_paired_differences(paired: pd.DataFrame, metrics: Sequence[str] = ("acc", "f1_weighted"),
                            paper: pd.DataFrame | None = None, title: str = "", ax=None) -> plt.Figure:
    """PACE Fig. 4a–b: mean seed-paired difference with its 95 % t interval per dataset,
    Win/Tie/Loss on the right; ``paper``: the paper's mean differences (``dataset, metric, value``,
    :func:`pace_nb.viz.frames.paper_paired_means`) as ×. A row far beyond the others (more than
    2.5 × their largest interval end) is drawn at the right edge with its numbers, so that the
    others stay readable. ``paired``: :func:`pace_nb.analysis.diagnostics.paired_summary`."""
    from pace_nb.viz.ablation import PAPER_MARK, mark_clipped

    _require(paired, ["dataset", "metric", "mean", "ci_low", "ci_high", "wins", "ties", "losses"],
             "plot_paired_differences")
    metrics = [m for m in metrics if m in set(paired["metric"])]
    paired = _in_order(paired)
    fig, axes = subplots(ax, 1, len(metrics), figsize=(FULL, 0.45 * paired["dataset"].nunique() + 1.4), squeeze=False)
    names = {"acc": "accuracy", "f1_weighted": "weighted F1", "f1_macro": "macro F1"}
    pv = paper.set_index(["dataset", "metric"])["value"] if paper is not None and len(paper) else pd.Series(dtype=float)
    for ax, m in zip(axes[0], metrics, strict=True):
        f = paired[paired["metric"] == m].reset_index(drop=True)
        y = np.arange(len(f))[::-1]
        ref = np.array([pv.get((d, m), np.nan) for d in f["dataset"]], dtype=float)
        lo_ci, hi_ci = f["ci_low"].fillna(f["mean"]).to_numpy(), f["ci_high"].fillna(f["mean"]).to_numpy()
        cap = _clip_limit(np.minimum(lo_ci, np.nan_to_num(ref, nan=0)), np.maximum(hi_ci, np.nan_to_num(ref, nan=0)),
                          f["mean"].to_numpy())
        keep = np.ones(len(f), bool) if cap is None else f["mean"].to_numpy() <= cap
        lo = (f["mean"] - f["ci_low"]).fillna(0).clip(lower=0)
        hi = (f["ci_high"] - f["mean"]).fillna(0).clip(lower=0)
        ax.errorbar(f["mean"][keep], y[keep], xerr=[lo[keep], hi[keep]], fmt="o", color=method_color("pace"),
                    capsize=3, ms=4, zorder=4)
        ok = keep & (ref == ref)
        ax.scatter(ref[ok], y[ok], **PAPER_MARK)
        ax.axvline(0, color="k", lw=0.8)
        if cap is not None:
            left = min(0.0, float(np.nanmin(np.r_[lo_ci[keep], ref[ok]]))) if keep.any() else 0.0
            ax.set_xlim(left - 0.1 * (cap - left), cap)
            for yi, mean, r in zip(y[~keep], f["mean"][~keep], ref[~keep], strict=True):
                mark_clipped(ax, cap, yi, f"{mean:+.2f}" + (f" (paper {r:+.2f})" if r == r else ""), side="right")
        ax.set_yticks(y, _setting_labels(f))
        ax.set(xlabel=f"PACE − Local, {names.get(m, m)} (points)", ylabel="dataset" if m == metrics[0] else "",
               title=f"({'ab'[metrics.index(m)]}) {names.get(m, m)}")
        sec = ax.secondary_yaxis("right")
        sec.set_yticks(y, [f"{w}/{t}/{l}" for w, t, l in zip(f["wins"], f["ties"], f["losses"], strict=True)])
        sec.tick_params(length=0, labelsize="small", pad=12 if cap is not None else 4)
        sec.set_ylabel("wins / ties / losses", fontsize="small")
        ax.set_ylim(-0.7, len(f) - 0.3)
    seeds = int(paired["n"].max()) if "n" in paired.columns and len(paired) else 0
    if len(pv):
        handles = [plt.Line2D([], [], marker="o", color=method_color("pace"), ls=""),
                   plt.Line2D([], [], marker="x", color="k", ls="")]
        fig.legend(handles, ["ours: mean, 95 % paired t interval", "paper: Table 1's PACE − Local"],
                   loc="outside lower center", ncols=2, fontsize="small")
    fig.suptitle(title or f"seed-paired differences, PACE − Local (PACE Fig. 4; {seeds} seeds per dataset)")
    return fig


def plot_harm_units(harm: pd.DataFrame, worst: pd.DataFrame | None = None, paper: dict | None = None,
                    title: str = "", ax=None) -> plt.Figure:
    """PACE Fig. 4c: helped / tied / harmed receiver–seed units per dataset (stacked bars);
    labels give the worst fixed-receiver seed mean. ``harm``: ``dataset, helped, tied, harmed``;
    ``worst``: ``dataset, mean_diff`` per receiver (receiver means) or ``worst_mean``; ``paper``:
    the paper's pooled units (:func:`pace_nb.viz.frames.paper_harm_units`), drawn below ours pooled
    over the same datasets (when every one of them was run)."""
    _require(harm, ["dataset", "helped", "tied", "harmed"], "plot_harm_units")
    harm = _in_order(harm)
    labels = _setting_labels(harm)
    if worst is not None and len(worst) and harm["dataset"].is_unique:
        col = "mean_diff" if "mean_diff" in worst.columns else "worst_mean"
        wm = worst.groupby("dataset")[col].min()
        labels = [f"{d} ({wm[d]:+.2f})" if d in wm.index else d for d in harm["dataset"]]
    bars = [(lab, r) for lab, (_, r) in zip(labels, harm.iterrows(), strict=True)]
    if paper:
        pooled = harm[harm["dataset"].isin(paper["datasets"])]
        name = "+".join(paper["datasets"])
        if pooled["dataset"].nunique() == len(paper["datasets"]) and harm["dataset"].is_unique:
            bars.append((f"ours, {name}", pooled[["helped", "tied", "harmed"]].sum()))
        bars.append((f"paper, {name}", pd.Series({k: paper[k] for k in ("helped", "tied", "harmed")})))
    fig, ax = subplots(ax, figsize=(FULL, max(2.0, 0.42 * len(bars) + 1.4)))
    y = np.arange(len(bars))[::-1].astype(float)
    if paper:  # a gap between the datasets and the pooled rows
        y[len(harm):] -= 0.5
    for k in ("helped", "tied", "harmed"):
        v = np.array([float(r[k]) for _, r in bars])
        left = np.array([sum(float(r[j]) for j in ("helped", "tied", "harmed")[:("helped", "tied", "harmed").index(k)])
                         for _, r in bars])
        ax.barh(y, v, left=left, color=OUTCOME_COLORS[k], label=k, height=0.7,
                edgecolor="white", lw=0.5)
        for yi, l, vi in zip(y, left, v, strict=True):
            if vi > 0:
                ax.text(l + vi / 2, yi, f"{int(vi)}", ha="center", va="center", fontsize="small")
    ax.set_yticks(y, [lab for lab, _ in bars])
    ax.set(xlabel="receiver–seed units", ylabel="dataset",
           title=title or "helped / tied / harmed receiver–seed units (PACE Fig. 4c)\n"
                          "(in brackets: the worst fixed receiver's seed mean, points)")
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


def plot_silos(silos: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """Per silo (client): its CNLL α* (top; 0 keeps the Local model) and PACE − Local on its own
    test nodes (bottom; bar: mean over seeds, dots: seeds), the worst silo named.
    ``silos``: :func:`pace_nb.viz.frames.silo_frame`."""
    _require(silos, ["receiver", "seed", "alpha", "diff"], "plot_silos")
    fig, (top, bot) = subplots(ax, 2, 1, figsize=(FULL, 2 * ROW), sharex=True, height_ratios=[1, 1.3])
    silo = sorted(silos["receiver"].unique())
    x = {r: i for i, r in enumerate(silo)}
    means = silos.groupby("receiver")[["alpha", "diff"]].mean()
    xs = silos["receiver"].map(x)
    top.bar(range(len(silo)), means.loc[silo, "alpha"], color=method_color("pace"), alpha=0.35, width=0.6)
    top.scatter(xs, silos["alpha"], color=method_color("pace"), s=10, zorder=3)
    top.set(ylim=(0, 1.05), ylabel="CNLL α*", title="α*: the weight of the returned model (0 = Local kept)")
    diff = means.loc[silo, "diff"]
    colours = [OUTCOME_COLORS["helped" if v > 0.01 else "harmed" if v < -0.01 else "tied"] for v in diff]
    bot.bar(range(len(silo)), diff, color=colours, width=0.6)
    bot.scatter(xs, silos["diff"], color="k", s=8, zorder=3)
    bot.axhline(0, color="k", lw=0.8)
    worst = diff.idxmin()
    bot.annotate(f"worst: silo {worst}, {diff[worst]:+.2f} points", (x[worst], diff[worst]), xytext=(0, -14),
                 textcoords="offset points", ha="center", va="top", fontsize="small", fontweight="bold")
    lo, hi = bot.get_ylim()
    bot.set_ylim(lo - 0.2 * (hi - lo), hi)
    bot.set_xticks(range(len(silo)), [str(r) for r in silo])
    bot.set(xlabel="silo (client)", ylabel="PACE − Local (points)",
            title="PACE − Local on each silo's own test nodes (bar: mean, dots: seeds)")
    for a in (top, bot):
        a.title.set_fontsize("small")
    seeds = silos["seed"].nunique()
    fig.suptitle(title or f"per silo: α* and what PACE changes ({seeds} seed{'s' if seeds != 1 else ''})")
    return fig
