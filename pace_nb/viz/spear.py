"""SPEAR figures (Fig. 2, 4, 5) and the ours-vs-paper scatter, in the :mod:`pace_nb.viz.pace` style."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from pace_nb.viz.style import COLUMN, FULL, ROW, method_color, panel_grid as _grid, require_columns as _require


def _class_palette(labels) -> dict:
    classes = sorted(pd.unique(labels))
    return dict(zip(classes, sns.color_palette("tab10" if len(classes) <= 10 else "tab20", len(classes))))


def plot_umap_panels(coords: pd.DataFrame, silhouettes: Mapping[str, float] | None = None,
                     order: Sequence[str] | None = None, title: str = "") -> plt.Figure:
    """SPEAR Fig. 2: UMAP of node representations, top row coloured by class, bottom row by
    client, cosine silhouette (class labels) in each title. ``coords``: ``representation,
    x, y, label, client``; ``silhouettes``: representation → score."""
    _require(coords, ["representation", "x", "y", "label", "client"], "plot_umap_panels")
    reps = list(order or dict.fromkeys(coords["representation"]))
    fig, axes = plt.subplots(2, len(reps), figsize=(max(FULL, 1.8 * len(reps)), 2 * ROW * 0.95), squeeze=False)
    cls_pal = _class_palette(coords["label"])
    cli_pal = dict(zip(sorted(coords["client"].unique()), sns.color_palette("husl", coords["client"].nunique())))
    for j, rep in enumerate(reps):
        f = coords[coords["representation"] == rep]
        for i, (col, pal) in enumerate((("label", cls_pal), ("client", cli_pal))):
            ax = axes[i, j]
            ax.scatter(f["x"], f["y"], c=f[col].map(pal).tolist(), s=2, linewidths=0, rasterized=True)
            ax.set(xticks=[], yticks=[])
            ax.grid(False)
            if i == 0:
                s = (silhouettes or {}).get(rep)
                ax.set_title(rep + ("" if s is None else f"\nsilhouette {s:+.3f}"), fontsize="small")
        axes[0, 0].set_ylabel("coloured by class")
        axes[1, 0].set_ylabel("coloured by client")
    fig.suptitle(title or "UMAP of node representations (SPEAR Fig. 2; cosine silhouette by class)")
    return fig


def plot_silhouettes(scores: pd.DataFrame, title: str = "") -> plt.Figure:
    """Cosine silhouette per representation (bars). ``scores``: ``representation, silhouette``."""
    _require(scores, ["representation", "silhouette"], "plot_silhouettes")
    fig, ax = plt.subplots(figsize=(COLUMN, ROW))
    colours = [method_color("raw features" if r == "raw" else r) for r in scores["representation"]]
    ax.bar(scores["representation"], scores["silhouette"], color=colours)
    for x, v in enumerate(scores["silhouette"]):
        ax.text(x, v, f"{v:+.3f}", ha="center", va="bottom" if v >= 0 else "top", fontsize="x-small")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(ylabel="silhouette (cosine, by class)", xlabel="representation", title=title or "cosine silhouette by class (SPEAR Fig. 2)")
    ax.tick_params(axis="x", rotation=30)
    return fig


def plot_prototypes(nodes: pd.DataFrame, protos: pd.DataFrame, distances: Mapping[str, float] | None = None,
                    title: str = "") -> plt.Figure:
    """SPEAR Fig. 5: (a) local prototypes (diamonds) and (b) global prototypes (stars) over
    the UMAP of node representations (grey-tinted by class). ``nodes``: ``x, y, label``;
    ``protos``: ``kind`` ("local" | "global"), ``x, y, label``; ``distances``: kind → mean
    cosine distance to the true class centroids."""
    _require(nodes, ["x", "y", "label"], "plot_prototypes (nodes)")
    _require(protos, ["kind", "x", "y", "label"], "plot_prototypes (prototypes)")
    pal = _class_palette(pd.concat([nodes["label"], protos["label"]]))
    fig, axes = plt.subplots(1, 2, figsize=(FULL, ROW + 0.6), sharex=True, sharey=True)
    for ax, kind, marker, size in ((axes[0], "local", "D", 28), (axes[1], "global", "*", 150)):
        ax.scatter(nodes["x"], nodes["y"], c=nodes["label"].map(pal).tolist(), s=2, alpha=0.15, linewidths=0,
                   rasterized=True)
        p = protos[protos["kind"] == kind]
        ax.scatter(p["x"], p["y"], c=p["label"].map(pal).tolist(), marker=marker, s=size, edgecolors="k",
                   linewidths=0.6, zorder=3)
        d = (distances or {}).get(kind)
        ax.set_title(f"({'ab'[kind == 'global']}) {kind} prototypes"
                     + ("" if d is None else f"\nmean cosine distance to true centroids {d:.4f}"), fontsize="small")
        ax.set(xticks=[], yticks=[])
        ax.grid(False)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=str(k)) for k, c in pal.items()]
    fig.legend(handles=handles, title="class", loc="outside right center", fontsize="x-small")
    fig.suptitle(title or "local vs calibrated global prototypes (SPEAR Fig. 5)")
    return fig


_PARAM_LABELS = {"beta": "Dirichlet β", "gamma": "shrinkage γ", "T": "PPR steps T", "a": "propagation weight a",
                 "num_clients": "clients K"}


def plot_sweeps(sweeps: pd.DataFrame, hue: str = "dataset", ncols: int = 4, title: str = "") -> plt.Figure:
    """SPEAR Fig. 4: accuracy against each swept hyperparameter, one panel per parameter.
    ``sweeps``: ``param, value, acc`` and the ``hue`` column (dataset or method); several
    seeds per point give a ±sd band. Log x-axis for γ."""
    _require(sweeps, ["param", "value", "acc", hue], "plot_sweeps")
    params = list(dict.fromkeys(sweeps["param"]))
    fig, axes = _grid(len(params), ncols, height=ROW)
    hues = list(dict.fromkeys(sweeps[hue]))
    if hue in ("method", "variant"):
        pal = {h: method_color("spear" if h == "full" else h) for h in hues}
    else:
        pal = dict(zip(hues, sns.color_palette("colorblind", len(hues))))
    for i, (ax, p) in enumerate(zip(axes, params)):
        f = sweeps[sweeps["param"] == p].astype({"value": float})
        sns.lineplot(f, x="value", y="acc", hue=hue, hue_order=hues, palette=pal, marker="o", errorbar="sd",
                     ax=ax, legend=i == 0, linewidth=1.2)
        if p == "gamma" and (f["value"] > 0).all():
            ax.set_xscale("log")
        ax.set(xlabel=_PARAM_LABELS.get(p, p), ylabel="test accuracy (%)" if i % ncols == 0 else "")
    if axes[0].get_legend() is not None:
        axes[0].get_legend().remove()
        from pace_nb.methods.spear.core import VARIANT_LABELS

        handles = [plt.Line2D([], [], color=pal[h], marker="o") for h in hues]
        labels = [VARIANT_LABELS.get(h, h) if hue == "variant" else str(h) for h in hues]
        fig.legend(handles, labels, loc="outside lower center", ncols=len(hues), fontsize="small")
    fig.suptitle(title or "SPEAR sensitivity (Fig. 4)")
    return fig


def plot_ours_vs_paper(table: pd.DataFrame, label: str = "label", limit: int = 40, title: str = "") -> plt.Figure:
    """Every reproduced number as ours − paper (a dot per value, 0 = exact), grouped by table;
    the ``limit`` largest gaps when there are more. ``table``: ``ours, paper, table`` and a
    ``label`` column naming the entry (e.g. :func:`pace_nb.viz.frames.ours_vs_paper`)."""
    _require(table, ["ours", "paper", "table"], "plot_ours_vs_paper")
    f = table.dropna(subset=["ours", "paper"])
    _require(f, ["ours"], "plot_ours_vs_paper (rows with both values)")
    f = f.assign(gap=f["ours"] - f["paper"])
    shown = f.loc[f["gap"].abs().nlargest(min(limit, len(f))).index] if len(f) > limit else f
    shown = shown.sort_values(["table", "gap"], key=lambda c: c.astype(str) if c.name == "table" else c)
    names = shown[label].astype(str).tolist() if label in shown.columns else [str(i) for i in range(len(shown))]
    fig, ax = plt.subplots(figsize=(FULL, 0.22 * len(shown) + 1.3))
    y = list(range(len(shown)))[::-1]
    tabs = list(dict.fromkeys(shown["table"].astype(str)))
    pal = dict(zip(tabs, sns.color_palette("tab10", len(tabs))))
    ax.scatter(shown["gap"], y, c=[pal[t] for t in shown["table"].astype(str)], s=18, zorder=3)
    ax.hlines(y, 0, shown["gap"], color="#bdbdbd", lw=1)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, names, fontsize="x-small")
    ax.set(xlabel="ours − paper (points; α, byte ratios and unit counts in their own units)", ylabel="reproduced value",
           title=title or (f"ours vs paper: {len(f)} values compared"
                           + (f", the {limit} largest gaps shown" if len(f) > limit else "")))
    handles = [plt.Line2D([], [], marker="o", ls="", color=c) for c in pal.values()]
    fig.legend(handles, [f"Table {t}" for t in pal], fontsize="x-small", loc="outside right upper")
    return fig
