"""Figures of the PACE and SPEAR papers (seaborn), as pure functions of tidy DataFrames.

Style, palette, sizes and :func:`save_figure` live in :mod:`pace_nb.viz.style`. Every
plotting function takes a tidy frame with documented columns and returns the
``matplotlib`` Figure; it never reads files or trains anything.
SPEAR's figures live in :mod:`pace_nb.viz.spear`.
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from matplotlib.ticker import FuncFormatter

from pace_nb.core.schema import DIRECTION_COLORS
from pace_nb.data.datasets import dataset_order
from pace_nb.methods.registry import method_label
from pace_nb.viz.style import (COLUMN, FULL, ROW, client_dashes, client_palette, fixed_jitter,  # noqa: F401
                              method_color, method_marker, method_palette, panel_grid, require_columns, save_figure, set_style, subplots)

_require, _grid = require_columns, panel_grid
_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")  # log axes: 2, 5, 10, 50 instead of 2×10⁰ …


def _datasets(values) -> list[str]:
    """Datasets in the papers' order (registry order: Cora, CiteSeer, PubMed, …)."""
    return sorted(dict.fromkeys(values), key=dataset_order)


# ------------------------------------------------------------------ 01 local training
def plot_partition(parts: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """Client sizes by split (left) and client × class label counts (right).

    ``parts``: ``client, class, split, count`` (split ∈ train/val/test)."""
    _require(parts, ["client", "class", "split", "count"], "plot_partition")
    fig, (a, b) = subplots(ax, 1, 2, figsize=(FULL, ROW + 0.4), width_ratios=[1, 1.3])
    sizes = parts.pivot_table(index="client", columns="split", values="count", aggfunc="sum").fillna(0)
    sizes = sizes[[s for s in ("train", "val", "test") if s in sizes.columns]]
    bottom = np.zeros(len(sizes))
    for split, colour in zip(sizes.columns, sns.color_palette("Blues_r", 4), strict=False):  # up to 3 splits, 4 shades
        a.bar(sizes.index.astype(str), sizes[split], bottom=bottom, color=colour, label=split)
        bottom += sizes[split].to_numpy()
    a.set(xlabel="client", ylabel="nodes", title="client sizes", ylim=(0, 1.22 * bottom.max()))
    a.legend(fontsize="small", ncols=3, loc="upper center", title="split")
    labels = parts.pivot_table(index="client", columns="class", values="count", aggfunc="sum").fillna(0)
    frac = labels.div(labels.sum(axis=1).replace(0, 1), axis=0)
    sns.heatmap(frac, ax=b, cmap="mako_r", vmin=0, vmax=float(frac.to_numpy().max()),
                cbar_kws={"label": "share of the client's nodes"},
                annot=labels.shape[1] <= 8 and labels.shape[0] <= 12, fmt=".2f", annot_kws={"size": 8})
    b.set(xlabel="class", ylabel="client", title="label distribution per client")
    b.tick_params(axis="y", rotation=0)
    fig.suptitle(title or "partition: client sizes and label skew")
    return fig


def plot_training_curves(curves: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """Training loss, training accuracy and — when ``curves`` has a ``val_acc`` column with
    values — validation accuracy per epoch, one line per client (mean over seeds, band =
    range). Validation accuracy comes from the training forward, i.e. **with dropout on**; its
    panel also draws the mean over clients and marks the first epoch where that mean comes
    within 1 point of its peak, so a reader sees where it plateaus. ``curves``: ``client, seed, epoch, loss, train_acc[, val_acc]``
    (fractions). Three panels with validation accuracy, else two (``ax``: that many Axes)."""
    _require(curves, ["client", "epoch", "loss", "train_acc"], "plot_training_curves")
    val = "val_acc" in curves.columns and bool(curves["val_acc"].notna().any())
    cols = ["loss", "train_acc"] + (["val_acc"] if val else [])
    labels = ["training loss (cross-entropy)", "training accuracy (%)", "validation accuracy (%)\n(dropout on)"]
    fig, axes = subplots(ax, 1, len(cols), figsize=(FULL, ROW + (0.6 if val else 0.0)))  # room for the legend
    frame = curves.assign(client=curves["client"].astype(int), **{c: 100 * curves[c] for c in cols[1:]})
    pal, dashes = client_palette(frame["client"]), client_dashes(frame["client"])
    for ax, col, label in zip(axes, cols, labels, strict=False):
        sns.lineplot(frame, x="epoch", y=col, hue="client", palette=pal, style="client", dashes=dashes,
                     errorbar=("pi", 100), ax=ax, legend=False, linewidth=1)
        ax.set(xlabel="epoch", ylabel=label)
    axes[0].set_yscale("log")
    axes[0].yaxis.set_major_formatter(_PLAIN)
    axes[0].yaxis.set_minor_formatter(_PLAIN if axes[0].get_ylim()[1] / axes[0].get_ylim()[0] < 20 else "")
    handles = [plt.Line2D([], [], color=c, lw=1.5, ls="--" if dashes[k] else "-") for k, c in pal.items()]
    names = [str(c) for c in pal]
    if val:
        mean = frame.groupby("epoch")["val_acc"].mean()
        flat = int(mean.index[(mean >= mean.max() - 1).to_numpy()][0])  # first epoch within 1 point of the peak
        axes[2].plot(mean.index, mean.values, color="k", lw=2.5)
        axes[2].axvline(flat, color="k", ls=":", lw=1.2)
        handles += [plt.Line2D([], [], color="k", lw=2.5), plt.Line2D([], [], color="k", ls=":", lw=1.2)]
        names += ["mean", f"mean within 1 pt\nof {mean.max():.1f} %\nby epoch {flat}"]
    fig.legend(handles, names, title="client", fontsize="small", loc="outside right center")
    fig.suptitle(title or "local training, mean over seeds (band: range); last checkpoint = $W_L$")
    return fig


def plot_client_accuracy(rows: pd.DataFrame, methods: Sequence[str] = ("local",), metric: str = "acc",
                         title: str = "", ax=None) -> plt.Figure:
    """Per-receiver test accuracy from result rows: one dot per seed, a bar at the seed
    mean; dashed lines: pooled accuracy. Pass rows of one variant/rank per method."""
    _require(rows, ["method", "receiver", "seed", metric], "plot_client_accuracy")
    frame = rows[(rows["receiver"] >= 0) & rows["method"].isin(methods)]
    _require(frame, ["method"], f"plot_client_accuracy (methods {list(methods)})")
    fig, ax = subplots(ax, figsize=(FULL, ROW))
    names = [method_label(m) for m in methods]
    pal = {method_label(m): method_color(m) for m in methods}
    frame = frame.assign(method=frame["method"].map(method_label))
    kw = dict(x="receiver", y=metric, hue="method", hue_order=names, palette=pal, ax=ax,
              dodge=0.4 if len(methods) > 1 else False)
    with fixed_jitter():
        sns.stripplot(frame, size=3.5, jitter=0.08, legend=False, alpha=0.7, **kw)
    sns.pointplot(frame, errorbar=None, markers="_", markersize=14, linestyle="none", legend=False, **kw)
    pooled = rows[(rows["receiver"] < 0) & rows["method"].isin(methods)].groupby("method")[metric].mean()
    for m in methods:
        if m in pooled.index:
            ax.axhline(pooled[m], color=method_color(m), ls="--", lw=1)
    handles = [plt.Line2D([], [], color=method_color(m), marker=method_marker(m), ls="", ms=5) for m in methods]
    handles += [plt.Line2D([], [], color=method_color(m), ls="--", lw=1) for m in methods if m in pooled.index]
    labels = names + [f"{method_label(m)}: pooled {pooled[m]:.1f} %" for m in methods if m in pooled.index]
    metric_name = {"acc": "test accuracy (%)", "f1_weighted": "weighted F1 (%)", "f1_macro": "macro F1 (%)"}
    ax.set(xlabel="client (receiver)", ylabel=metric_name.get(metric, metric),
           title=title or "accuracy on each client's own test nodes (dots: seeds, bar: mean)")
    fig.legend(handles, labels, fontsize="small", loc="outside right center")
    return fig


# ------------------------------------------------------------------ 02 low rank + transport
def plot_singular_spectra(spectra: pd.DataFrame, rank: int = 6, title: str = "", ax=None) -> plt.Figure:
    """Singular values of Δ_i per weight matrix (one line per client, top) and the share of
    squared Frobenius energy kept by rank r (bottom; Eckart–Young). Matrices whose rank is
    ≤ r are sent dense. ``spectra``: ``param, client, index, sigma`` (index from 0)."""
    _require(spectra, ["param", "client", "index", "sigma"], "plot_singular_spectra")
    params = list(dict.fromkeys(spectra["param"]))
    fig, axes = subplots(ax, 2, len(params), figsize=(FULL, 2 * ROW), squeeze=False, sharex="col")
    pal, dashes = client_palette(spectra["client"]), client_dashes(spectra["client"])
    for j, p in enumerate(params):
        f = spectra[spectra["param"] == p].assign(index=lambda d: d["index"] + 1)
        f = f.assign(energy=f.groupby("client")["sigma"].transform(lambda s: (s**2).cumsum() / max((s**2).sum(), 1e-30)))
        kw = dict(hue="client", palette=pal, style="client", dashes=dashes, linewidth=1, legend=False)
        sns.lineplot(f, x="index", y="sigma", ax=axes[0, j], **kw)
        sns.lineplot(f, x="index", y="energy", ax=axes[1, j], **kw)
        full = int(f["index"].max())
        note = " (sent dense)" if full <= rank else ""
        axes[0, j].set(yscale="log", title=f"{p}: {full} singular values{note}", xlabel="",
                       ylabel=r"singular value of $\Delta_i$" if j == 0 else "")
        axes[1, j].set(ylim=(0, 1.05), xlabel="rank r", ylabel=r"energy kept (share of $\|\Delta_i\|_F^2$)" if j == 0 else "")
        if rank < full:
            for ax in axes[:, j]:
                ax.axvline(rank, color="k", ls=":", lw=1)
            e = f[f["index"] == rank]["energy"]
            right = rank > 0.6 * full
            axes[1, j].annotate(f"r = {rank}: {e.mean():.0%} (mean)", (rank, e.mean()), xytext=(-8 if right else 8, -16),
                                textcoords="offset points", fontsize="small", ha="right" if right else "left")
    handles = [plt.Line2D([], [], color=c, lw=1.5, ls="--" if dashes[k] else "-") for k, c in pal.items()]
    fig.legend(handles, [str(c) for c in pal], title="client", loc="outside right center", fontsize="small")
    fig.suptitle(title or r"spectra of the local updates $\Delta_i = W_L - W_0$")
    return fig


def plot_sketch_moments(sketches: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """Normalized second-moment sketches c_i (Eq. 4–5) as client × input-column heatmaps
    (log scale, columns sorted by their mean over clients). ``sketches``: ``param, client, column, c``."""
    _require(sketches, ["param", "client", "column", "c"], "plot_sketch_moments")
    from matplotlib.colors import LogNorm

    params = list(dict.fromkeys(sketches["param"]))
    fig, axes = subplots(ax, 1, len(params), figsize=(FULL, ROW), squeeze=False)
    for ax, p in zip(axes[0], params, strict=True):
        m = sketches[sketches["param"] == p].pivot_table(index="client", columns="column", values="c")
        m = m[m.mean().sort_values(ascending=False).index]
        pos = m.to_numpy()[m.to_numpy() > 0]
        im = ax.imshow(m.clip(lower=pos.min() if pos.size else 1e-6).to_numpy(), aspect="auto", cmap="magma",
                       norm=LogNorm(vmin=max(pos.min() if pos.size else 1e-6, 1e-3), vmax=m.to_numpy().max()),
                       interpolation="nearest")
        ax.set(xlabel="input column (sorted by mean c)", ylabel="client", yticks=range(len(m)),
               yticklabels=m.index, title=f"{p} ({m.shape[1]} input columns)")
        ax.grid(False)
        fig.colorbar(im, ax=ax, label="sketch c (mean 1)")
    fig.suptitle(title or "propagated-message moment sketches per client (Eq. 4–5)")
    return fig


def plot_consensus_compare(cons: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """RegMean vs plain-mean consensus: per input column, ‖Δ^C[:, d]‖ under each rule,
    against the column's total sketch weight. ``cons``: ``param, column, regmean, mean, weight``."""
    _require(cons, ["param", "column", "regmean", "mean", "weight"], "plot_consensus_compare")
    params = list(dict.fromkeys(cons["param"]))
    fig, axes = subplots(ax, 1, len(params), figsize=(FULL, ROW + 0.2), squeeze=False)
    for ax, p in zip(axes[0], params, strict=True):
        f = cons[cons["param"] == p]
        sc = ax.scatter(f["mean"], f["regmean"], c=np.log10(f["weight"].clip(lower=1e-3)), cmap="viridis", s=6)
        lim = [0, max(f["mean"].max(), f["regmean"].max()) * 1.05]
        ax.plot(lim, lim, color="k", lw=0.8, ls="--")
        ax.set(xlabel="column norm under Mean", ylabel="column norm under RegMean", title=p)
        fig.colorbar(sc, ax=ax, label=r"$\log_{10}\sum_j c_j[d]$ (floor −3)")
    fig.suptitle(title or r"RegMean vs Mean consensus $\Delta^C$: norm of each input column (Eq. 6–7)")
    return fig


def plot_rank_study(rows: pd.DataFrame, paper: pd.DataFrame | None = None, frozen_rank: int = 6,
                    title: str = "", ax=None) -> plt.Figure:
    """PACE Fig. 3: accuracy vs rank, one panel per dataset in the paper's order (line: mean over
    seeds, band: ± sd; dashed: Local; dotted: the frozen rank), and upload / return bytes relative
    to dense tensors (mean over datasets). Rank 0 = dense (plotted at the right).
    ``rows``: result rows of method ``pace`` variant ``full`` (several ranks) and ``local``.
    ``paper``: optional paper values (Table 5: ``dataset, rank, metric, value``), drawn as ×."""
    _require(rows, ["dataset", "method", "variant", "rank", "receiver", "acc", "upload_ratio", "return_ratio"],
             "plot_rank_study")
    pooled = rows[rows["receiver"] < 0]
    pace = pooled[(pooled["method"] == "pace") & (pooled["variant"] == "full")]
    _require(pace, ["rank"], "plot_rank_study (pace/full rows)")
    ranks = sorted(r for r in pace["rank"].unique() if r > 0)
    pos = {r: i for i, r in enumerate(ranks)} | {0: len(ranks)}
    ticks = [str(r) for r in ranks] + (["dense"] if (pace["rank"] == 0).any() else [])
    datasets = _datasets(pace["dataset"])
    fig, axes = subplots(ax, 1, len(datasets) + 1, figsize=(max(FULL, 2.3 * (len(datasets) + 1)), ROW + 0.3),
                             squeeze=False)
    axes = axes[0]
    has_paper = paper is not None and len(paper)
    for ax, ds in zip(axes, datasets, strict=False):  # the last panel is the bytes one
        f = pace[pace["dataset"] == ds].assign(x=lambda d: d["rank"].map(pos))
        sns.lineplot(f, x="x", y="acc", marker=method_marker("pace"), color=method_color("pace"), errorbar="sd", ax=ax,
                     legend=False)
        loc = pooled[(pooled["dataset"] == ds) & (pooled["method"] == "local")]["acc"]
        if len(loc):
            ax.axhline(loc.mean(), color=method_color("local"), ls="--", lw=1)
        if has_paper and paper is not None:
            pv = paper[(paper["dataset"] == ds) & (paper["metric"] == "acc") & paper["rank"].isin(list(pos))]
            if len(pv):
                ax.plot(pv["rank"].map(pos), pv["value"], "x", color="k", ms=6, mew=1.2)
        ax.set(title=ds, xlabel="rank r", ylabel="pooled accuracy (%)" if ds == datasets[0] else "")
    byt = pace.groupby("rank")[["upload_ratio", "return_ratio"]].mean().reset_index()
    byt = byt.assign(x=byt["rank"].map(pos)).sort_values("x")
    last = axes[-1]
    for col, direction, marker in (("upload_ratio", "upload", "o"), ("return_ratio", "return", "s")):
        last.plot(byt["x"], byt[col], marker=marker, ls="-", color=DIRECTION_COLORS[direction], ms=4)
    if has_paper and paper is not None:
        for metric, direction in (("upload_pct", "upload"), ("return_pct", "return")):
            pv = paper[(paper["metric"] == metric) & paper["rank"].isin(list(pos))]
            pv = pv.groupby("rank")["value"].mean().reset_index()
            last.plot(pv["rank"].map(pos), pv["value"], "x", color=DIRECTION_COLORS[direction], ms=6, mew=1.2)
    last.set(yscale="log", title="communication (mean of datasets)", xlabel="rank r", ylabel="bytes (% of dense)")
    last.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} %"))
    last.yaxis.set_minor_formatter("")
    for ax in axes:
        ax.set_xticks(range(len(ticks)), ticks)
        if frozen_rank in pos:
            ax.axvline(pos[frozen_rank], color="k", ls=":", lw=1)
    pc, lc = method_color("pace"), method_color("local")
    handles = [plt.Line2D([], [], color=pc, marker=method_marker("pace")),
               plt.matplotlib.patches.Patch(color=pc, alpha=0.25), plt.Line2D([], [], color=lc, ls="--"),
               plt.Line2D([], [], color="k", ls=":"),
               plt.Line2D([], [], color=DIRECTION_COLORS["upload"], marker="o"),
               plt.Line2D([], [], color=DIRECTION_COLORS["return"], marker="s")]
    labels = [method_label("pace"), "± sd over seeds", method_label("local"), f"frozen rank {frozen_rank}",
              "upload", "return"]
    if has_paper:
        handles.append(plt.Line2D([], [], color="k", marker="x", ls=""))
        labels.append("paper (Table 5)")
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize="small")
    fig.suptitle(title or "rank sensitivity and communication (PACE Fig. 3)")
    return fig


# ------------------------------------------------------------------ 03 α paths
STAR = "#0072B2"  # the CNLL α* (blue: apart from PACE's vermillion under deuteranopia)

def plot_alpha_paths(paths: pd.DataFrame, alpha_star: pd.Series | dict | None = None, ncols: int = 5,
                     title: str = "", ax=None) -> plt.Figure:
    """CNLL along the logit segment z(α) = (1−α) z_L + α z_E, per receiver: validation NLL
    (upper panel) and validation / test accuracy (lower panel, %), α* marked.
    ``paths``: ``receiver, alpha, val_nll, val_acc, test_acc`` (accs as fractions, as
    :func:`pace_nb.methods.calibration.alpha_path` returns them); ``alpha_star``: receiver → α*."""
    _require(paths, ["receiver", "alpha", "val_nll", "val_acc", "test_acc"], "plot_alpha_paths")
    receivers = sorted(paths["receiver"].unique())
    ncols = max(1, min(ncols, len(receivers)))
    groups = int(np.ceil(len(receivers) / ncols))
    fig, axes = subplots(ax, 2 * groups, ncols, figsize=(FULL, groups * 2 * ROW * 0.72), sharex=True,
                             squeeze=False, height_ratios=[1, 1] * groups)
    stars = dict(alpha_star or {})
    for i in range(groups * ncols):
        top, bot = axes[2 * (i // ncols), i % ncols], axes[2 * (i // ncols) + 1, i % ncols]
        if i >= len(receivers):
            top.set_visible(False)
            bot.set_visible(False)
            continue
        r = receivers[i]
        f = paths[paths["receiver"] == r].sort_values("alpha")
        top.plot(f["alpha"], f["val_nll"], color="k", lw=1.2)
        bot.plot(f["alpha"], 100 * f["val_acc"], color=method_color("local"), lw=1.2, ls="--")
        bot.plot(f["alpha"], 100 * f["test_acc"], color=method_color("pace"), lw=1)
        top.set_title(f"receiver {r}" + (f"\nα* = {float(stars[r]):.2f}" if r in stars else ""), fontsize="small")
        if r in stars:
            a = float(stars[r])
            for ax in (top, bot):
                ax.axvline(a, color=STAR, lw=1.2)
            top.plot([a], [np.interp(a, f["alpha"], f["val_nll"])], "o", color=STAR, ms=4, clip_on=False)
        top.set_ylabel("validation NLL" if i % ncols == 0 else "")
        bot.set_ylabel("accuracy (%)" if i % ncols == 0 else "")
        bot.set(xlim=(0, 1), xlabel="α" if i // ncols == groups - 1 else "")
    handles = [plt.Line2D([], [], color="k", lw=1.2), plt.Line2D([], [], color=method_color("local"), ls="--"),
               plt.Line2D([], [], color=method_color("pace")), plt.Line2D([], [], color=STAR)]
    fig.legend(handles, ["validation NLL", "validation accuracy", "test accuracy", "CNLL α* (Eq. 10)"],
               loc="outside lower center", ncols=4, fontsize="small")
    fig.suptitle(title or r"CNLL per receiver along $z(\alpha) = (1-\alpha)\,z_L + \alpha\,z_E$ (Eq. 1)")
    return fig


def plot_alpha_utilisation(util: pd.DataFrame, paper: pd.DataFrame | None = None, title: str = "", ax=None) -> plt.Figure:
    """PACE Table 3 as a figure, ours beside the paper's: mean α*, share of α* = 0, upload
    and return bytes (% of dense) per dataset. ``util``: ``dataset, alpha_mean,
    alpha_zero_frac, upload_ratio, return_ratio`` (ratios in percent); ``paper``: Table 3
    paper values (``dataset, metric, value`` with metrics alpha_mean, alpha_zero_pct,
    upload_pct, return_pct)."""
    _require(util, ["dataset", "alpha_mean", "alpha_zero_frac", "upload_ratio", "return_ratio"],
             "plot_alpha_utilisation")
    ours = util.assign(alpha_zero_pct=100 * util["alpha_zero_frac"], upload_pct=util["upload_ratio"],
                       return_pct=util["return_ratio"])
    metrics = ["alpha_mean", "alpha_zero_pct", "upload_pct", "return_pct"]
    long = ours.melt(id_vars="dataset", value_vars=metrics, var_name="metric").assign(source="ours")
    if paper is not None and len(paper):
        long = pd.concat([long, paper[paper["metric"].isin(metrics)][["dataset", "metric", "value"]]
                          .assign(source="paper")], ignore_index=True)
    datasets = _datasets(long["dataset"])
    labels = {"alpha_mean": ("mean α*", "mean CNLL coefficient over receiver–seed units"),
              "alpha_zero_pct": ("α* = 0 (%)", "share of units that keep Local exactly (α* = 0)"),
              "upload_pct": ("upload (%)", "client upload, % of dense float32 model bytes"),
              "return_pct": ("return (%)", "personalized return, % of dense float32 model bytes")}
    fig, axes = subplots(ax, 4, 1, figsize=(FULL, 4 * ROW * 0.68), sharex=True)
    pal = {"ours": method_color("pace"), "paper": "#BBBBBB"}
    fmt = {"alpha_mean": "%.2f", "alpha_zero_pct": "%.0f", "upload_pct": "%.1f", "return_pct": "%.1f"}
    ran = set(ours["dataset"])
    for ax, m in zip(axes, metrics, strict=True):
        f = long[long["metric"] == m]
        sns.barplot(f, x="dataset", y="value", hue="source", order=datasets, hue_order=[h for h in pal if h in set(long["source"])],
                    palette=pal, ax=ax, errorbar=None, legend=m == metrics[0], saturation=1)
        for cont in ax.containers:
            ax.bar_label(cont, fmt=fmt[m], fontsize="small", padding=1)
        for i, d in enumerate(datasets):
            if d not in ran:
                ax.text(i - 0.2, 0, "not run", rotation=90, ha="center", va="bottom", fontsize="small",
                        fontstyle="italic", color="#555555")
        ax.set(ylabel=labels[m][0], xlabel="")
        ax.set_title(labels[m][1], loc="left", fontsize="small", fontweight="normal")
        ax.margins(y=0.3)
    axes[-1].set_xlabel("dataset")
    if axes[0].get_legend() is not None:
        axes[0].get_legend().remove()
        handles = [plt.matplotlib.patches.Patch(color=c) for c in pal.values()]
        fig.legend(handles, list(pal), fontsize="small", ncols=2, loc="outside lower center")
    fig.suptitle(title or "CNLL utilisation and communication at rank 6 (PACE Table 3)")
    return fig


# ------------------------------------------------------------------ 04 receiver harm (viz/harm.py)
from pace_nb.viz.harm import (_in_order, _setting_labels, plot_harm_units, plot_paired_differences,  # noqa: E402,F401
                              plot_receiver_means, plot_silos)
