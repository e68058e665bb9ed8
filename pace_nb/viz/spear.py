"""SPEAR figures (Fig. 2, 5; Fig. 4 in :mod:`pace_nb.viz.sweeps`) and the ours-vs-paper scatter, in the
:mod:`pace_nb.viz.pace` style."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from pace_nb.core.errors import ConfigError
from pace_nb.methods.registry import method_label
from pace_nb.viz.sweeps import _SERIES_COLORS, _SERIES_MARKERS, plot_sweeps  # noqa: F401  (SPEAR Fig. 4)
from pace_nb.viz.style import (FULL, ROW, client_palette, method_color, require_columns as _require, subplots)


#: Class colours: Okabe–Ito (up to 8 classes), then Paul Tol's muted scheme.
_CLASS_COLORS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000",
                 "#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#882255", "#AA4499", "#DDDDDD")
#: What SPEAR's text says of Fig. 2's cosine silhouettes on Cora (§3.2): raw features "modestly
#: positive", FedProto and FedGTA "below −0.29". (comparison, threshold) per representation.
PAPER_SILHOUETTE: dict[str, tuple[str, float]] = {"raw": (">", 0.0), "fedproto": ("<", -0.29), "fedgta": ("<", -0.29)}
_REPRESENTATION_LABELS = {"raw": "raw features", "spear": "SPEAR (PPR features)"}


def representation_label(rep: str) -> str:
    """Display name of a representation (raw features, SPEAR's PPR features, a method's hidden layer)."""
    return _REPRESENTATION_LABELS.get(rep, method_label(rep))


def _rep_colour(rep: str) -> str:
    return method_color("raw features" if rep == "raw" else rep)


def paper_silhouette_note(rep: str, ours: float | None) -> str:
    """"paper < −0.29: not reproduced" (or "reproduced") where SPEAR states a value; else ""."""
    if rep not in PAPER_SILHOUETTE:
        return ""
    op, v = PAPER_SILHOUETTE[rep]
    claim = f"paper {op} {v:+.2f}".replace("+0.00", "0").replace("-", "−")
    if ours is None or ours != ours:
        return claim
    holds = ours > v if op == ">" else ours < v
    return f"{claim}: {'reproduced' if holds else 'not reproduced'}"


def _class_palette(labels) -> dict:
    classes = sorted(pd.unique(labels))
    return {c: _CLASS_COLORS[i % len(_CLASS_COLORS)] for i, c in enumerate(classes)}


def plot_umap_panels(coords: pd.DataFrame, silhouettes: Mapping[str, float] | None = None,
                     order: Sequence[str] | None = None, title: str = "", ax=None) -> plt.Figure:
    """SPEAR Fig. 2: UMAP of node representations, top row coloured by class, bottom row by
    client, cosine silhouette (class labels) in each title with the paper's value and whether ours
    reproduces it. ``coords``: ``representation, x, y, label, client``; ``silhouettes``:
    representation → score."""
    _require(coords, ["representation", "x", "y", "label", "client"], "plot_umap_panels")
    reps = list(order or dict.fromkeys(coords["representation"]))
    fig, axes = subplots(ax, 2, len(reps), figsize=(min(max(FULL + 1.2, 1.9 * len(reps) + 1.2), 9.6), 2 * ROW + 0.5),
                             squeeze=False)
    cls_pal = _class_palette(coords["label"])
    cli_pal = client_palette(coords["client"])
    for j, rep in enumerate(reps):
        f = coords[coords["representation"] == rep]
        for i, (col, pal) in enumerate((("label", cls_pal), ("client", cli_pal))):
            ax = axes[i, j]
            ax.scatter(f["x"], f["y"], c=f[col].map(pal).tolist(), s=2, linewidths=0, rasterized=True)
            ax.set(xticks=[], yticks=[])
            ax.grid(False)
            if i == 0:
                s = (silhouettes or {}).get(rep)
                note = paper_silhouette_note(rep, s)
                ax.set_title(representation_label(rep).replace(" (", "\n(") + ("" if s is None else f"\nsilhouette {s:+.3f}")
                             + (f"\n{note.replace(': ', chr(10))}" if note else ""), fontsize="small",
                             color="#B00000" if note.endswith("not reproduced") else "k")
    axes[0, 0].set_ylabel("coloured by class")
    axes[1, 0].set_ylabel("coloured by client")
    dot = lambda c: plt.Line2D([], [], marker="o", ls="", color=c, ms=5)
    fig.legend([dot(c) for c in cls_pal.values()], [str(k) for k in cls_pal], title="class", ncols=2,
               loc="outside right upper", fontsize="small")
    fig.legend([dot(c) for c in cli_pal.values()], [str(k) for k in cli_pal], title="client", ncols=2,
               loc="outside right lower", fontsize="small")
    fig.suptitle(title or "UMAP of node representations (SPEAR Fig. 2; cosine silhouette by class)")
    return fig


def plot_silhouettes(scores: pd.DataFrame, title: str = "", ax=None) -> plt.Figure:
    """Cosine silhouette per representation (bars), the paper's stated value (§3.2) as a dashed
    mark with "reproduced" / "not reproduced". ``scores``: ``representation, silhouette``."""
    _require(scores, ["representation", "silhouette"], "plot_silhouettes")
    reps = scores["representation"].tolist()
    vals = scores["silhouette"].astype(float).tolist()
    fig, ax = subplots(ax, figsize=(FULL, ROW + 1.0))
    ax.bar(range(len(reps)), vals, color=[_rep_colour(r) for r in reps], width=0.65)
    for x, v in enumerate(vals):
        ax.text(x, v, f"{v:+.2f}", ha="center", va="bottom" if v >= 0 else "top", fontsize="small")
    for x, (r, v) in enumerate(zip(reps, vals, strict=True)):
        if r in PAPER_SILHOUETTE:
            op, pv = PAPER_SILHOUETTE[r]
            ax.hlines(pv, x - 0.38, x + 0.38, color="k", ls="--", lw=1.2)
            note = paper_silhouette_note(r, v).replace(": ", "\n")
            ax.text(x, pv - 0.04 if op == "<" else max(v, pv) + 0.12, note, ha="center",
                    va="top" if op == "<" else "bottom", fontsize="small",
                    color="#B00000" if note.endswith("not reproduced") else "k")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(reps)), [representation_label(r).replace(" (", "\n(") for r in reps])
    ax.set_ylim(min(-0.55, min(vals) - 0.1), max(1.0, max(vals) + 0.15))
    ax.set(ylabel="silhouette (cosine, by class)", xlabel="representation (dashed: the paper's value, SPEAR §3.2)",
           title=title or "cosine silhouette by class (SPEAR Fig. 2)")
    return fig


#: SPEAR §5 (Fig. 5), Cora: mean cosine distance of the prototypes to the true class centroids.
PAPER_PROTOTYPE_DISTANCE = {"local": 0.3217, "global": 0.1997}


def plot_prototypes(nodes: pd.DataFrame, protos: pd.DataFrame, distances: Mapping[str, float] | None = None,
                    title: str = "", ax=None) -> plt.Figure:
    """SPEAR Fig. 5: (a) local prototypes (diamonds) and (b) global prototypes (stars) over
    the UMAP of node representations (grey-tinted by class). ``nodes``: ``x, y, label``;
    ``protos``: ``kind`` ("local" | "global"), ``x, y, label``; ``distances``: kind → mean
    cosine distance to the true class centroids."""
    _require(nodes, ["x", "y", "label"], "plot_prototypes (nodes)")
    _require(protos, ["kind", "x", "y", "label"], "plot_prototypes (prototypes)")
    pal = _class_palette(pd.concat([nodes["label"], protos["label"]]))
    fig, axes = subplots(ax, 1, 2, figsize=(FULL, ROW + 0.6), sharex=True, sharey=True)
    for ax, kind, marker, size in ((axes[0], "local", "D", 28), (axes[1], "global", "*", 150)):
        ax.scatter(nodes["x"], nodes["y"], c=nodes["label"].map(pal).tolist(), s=2, alpha=0.15, linewidths=0,
                   rasterized=True)
        p = protos[protos["kind"] == kind]
        ax.scatter(p["x"], p["y"], c=p["label"].map(pal).tolist(), marker=marker, s=size, edgecolors="k",
                   linewidths=0.6, zorder=3)
        d = (distances or {}).get(kind)
        paper = PAPER_PROTOTYPE_DISTANCE[kind]
        ax.set_title(f"({'ab'[kind == 'global']}) {kind} prototypes"
                     + ("" if d is None else f"\nmean cosine distance to true centroids:\nours {d:.3f}, paper {paper:.3f}"),
                     fontsize="small")
        ax.set(xticks=[], yticks=[])
        ax.grid(False)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=str(k)) for k, c in pal.items()]
    fig.legend(handles=handles, title="class", loc="outside right center", fontsize="small")
    fig.suptitle(title or "local vs calibrated global prototypes (SPEAR Fig. 5)")
    return fig


_ACCURACY = {"acc", "f1_weighted", "f1_macro", "gap_acc", "gap_f1_weighted", "delta_acc", "max_drop_pts",
             "worst_mean", "worst_unit"}
_COMMUNICATION = {"upload_pct", "return_pct", "kib_client", "mib_total", "comm_kb", "comm_mb", "seconds",
                  "speedup_vs_fedavg"}
#: Share metrics and the count each is a share of (None: already a share; "alpha": α × 100).
_SHARES = {"alpha_mean": "alpha", "alpha_zero_pct": None, "helped": "units", "tied": "units", "harmed": "units",
           "nonnegative_means": "receivers"}
UNITS = ("accuracy", "communication", "shares")


def table_name(table: str) -> str:
    """Short name of a table id as the papers print it ("PACE Table 1", "SPEAR Tab. 3")."""
    from pace_nb.analysis.tables import TABLES

    return TABLES.get(table).obj.title.split(":")[0] if table in TABLES else str(table)


def _table_key(table: str) -> tuple:
    t = str(table)
    return (t.startswith("spear"), int(t) if t.isdigit() else 1000, t)


def unit_of(metric: str) -> str:
    """Which panel of :func:`plot_ours_vs_paper` a metric belongs to."""
    return ("accuracy" if metric in _ACCURACY else "communication" if metric in _COMMUNICATION
            else "shares" if metric in _SHARES else "accuracy" if str(metric).endswith("_pts") else "other")


def _entry(label: str) -> str:
    return label.split(": ", 1)[-1]


def _shares(f: pd.DataFrame) -> pd.DataFrame:
    """Share entries of ``f`` (every entry: the counts are looked up there) on one 0–100 % scale
    (α × 100; counts as a share of their units)."""
    out = []
    for _, r in f[f["metric"].isin(list(_SHARES))].iterrows():
        base = _SHARES[r["metric"]]
        col = _entry(r["label"]).split(" / ")[-1]
        if base == "alpha":
            out.append((r["table"], f"{_entry(r['label'])} (× 100)", 100 * r["ours"], 100 * r["paper"]))
        elif base is None:
            out.append((r["table"], _entry(r["label"]), r["ours"], r["paper"]))
        else:
            d = f[(f["table"] == r["table"]) & (f["metric"] == base) & f["label"].str.endswith(" / " + col)]
            if len(d) and d["ours"].iloc[0] and d["paper"].iloc[0]:
                out.append((r["table"], f"{_entry(r['label'])} (% of {base})", 100 * r["ours"] / d["ours"].iloc[0],
                            100 * r["paper"] / d["paper"].iloc[0]))
    return pd.DataFrame(out, columns=["table", "entry", "ours", "paper"])


def plot_ours_vs_paper(table: pd.DataFrame, unit: str = "accuracy", label: str = "label", title: str = "", ax=None) -> plt.Figure:
    """Every reproduced number against the paper's, one figure per unit (tables in the papers'
    order). ``accuracy``: ours − paper in points, a dot per value, one row per table (median
    and share within ±1 point in the row label); ``communication``: ours ÷ paper per entry (log
    axis: bytes and seconds in any unit); ``shares``: ours (●) and paper (×) on one 0–100 % scale
    (mean α* × 100, α* = 0, helped / tied / harmed units, receivers with a non-negative mean).
    ``table``: ``table, metric, ours, paper`` and a ``label`` column ("<table>: <row> / <col>",
    :func:`pace_nb.viz.frames.ours_vs_paper`)."""
    _require(table, ["ours", "paper", "table", "metric", label], "plot_ours_vs_paper")
    if unit not in UNITS:
        raise ConfigError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    every = table.dropna(subset=["ours", "paper"]).rename(columns={label: "label"}).astype({"table": str})
    f = every[[unit_of(m) == unit for m in every["metric"]]]
    _require(f, ["ours"], f"plot_ours_vs_paper ({unit}: rows with both values)")
    tabs = sorted(dict.fromkeys(f["table"]), key=_table_key)
    colour = lambda t: method_color("spear" if t.startswith("spear") else "pace")
    if unit == "accuracy":
        f = f.assign(gap=f["ours"] - f["paper"])
        fig, ax = subplots(ax, figsize=(FULL, 0.32 * len(tabs) + 1.3))
        row_of = {t: len(tabs) - 1 - i for i, t in enumerate(tabs)}
        rng = np.random.default_rng(0)
        names = []
        for t in tabs:
            g = f[f["table"] == t]["gap"].to_numpy()
            ax.scatter(g, row_of[t] + rng.uniform(-0.18, 0.18, len(g)), s=9, color=colour(t), alpha=0.6, lw=0)
            ax.plot([np.median(g)] * 2, [row_of[t] - 0.3, row_of[t] + 0.3], color="k", lw=1.5)
            names.append(f"{table_name(t)}: {len(g)} values, median {np.median(g):+.1f}, "
                         f"{100 * np.mean(np.abs(g) <= 1):.0f} % within ±1")
        ax.set_yticks([row_of[t] for t in tabs], names)
        ax.axvline(0, color="k", lw=0.8)
        ax.set(xlabel="ours − paper (accuracy / F1 points; tick: median)", ylim=(-0.6, len(tabs) - 0.4))
        heading = f"ours vs paper, accuracy and F1: {len(f)} values in {len(tabs)} tables"
    elif unit == "communication":
        f = f.assign(ratio=f["ours"] / f["paper"], key=[_table_key(t) for t in f["table"]]).sort_values("key", kind="stable")
        fig, ax = subplots(ax, figsize=(FULL, 0.2 * len(f) + 1.3))
        y = np.arange(len(f))[::-1]
        ax.scatter(f["ratio"], y, color=[colour(t) for t in f["table"]], s=18, zorder=3)
        ax.hlines(y, 1, f["ratio"], color="#BBBBBB", lw=1)
        ax.axvline(1, color="k", lw=0.8)
        ax.set_yticks(y, [f"{table_name(t)} · {_entry(lab)}: {o:.3g} vs {p:.3g}"
                          for t, lab, o, p in zip(f["table"], f["label"], f["ours"], f["paper"], strict=True)])
        ax.set_xscale("log")
        lo, hi = float(f["ratio"].min()), float(f["ratio"].max())
        lim = (min(lo, 0.8) / 1.3, max(hi, 1.25) * 1.3)
        ax.set(xlabel="ours ÷ paper (1× = the paper's value)", xlim=lim)
        ax.set_xticks([t for t in (0.01, 0.1, 0.2, 0.5, 1, 2, 5, 10, 100) if lim[0] <= t <= lim[1]])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.xaxis.set_minor_formatter("")
        heading = f"ours vs paper, communication and time: {len(f)} values"
    else:
        sh = _shares(every)
        _require(sh, ["ours"], "plot_ours_vs_paper (shares with their counts)")
        sh = sh.assign(key=[_table_key(t) for t in sh["table"]]).sort_values("key", kind="stable")
        fig, ax = subplots(ax, figsize=(FULL, 0.24 * len(sh) + 1.3))
        y = np.arange(len(sh))[::-1]
        ax.hlines(y, sh["ours"], sh["paper"], color="#BBBBBB", lw=1.5)
        ax.scatter(sh["paper"], y, marker="x", color="k", s=24, zorder=3, label="paper")
        ax.scatter(sh["ours"], y, color=[colour(t) for t in sh["table"]], s=20, zorder=4, label="ours")
        ax.set_yticks(y, [f"{table_name(t)} · {e.replace('Cora+CiteSeer+PubMed', 'citation datasets')}: {o:.1f} vs {p:.1f}"
                          for t, e, o, p in zip(sh["table"], sh["entry"], sh["ours"], sh["paper"], strict=True)])
        ax.set(xlabel="share (%)", xlim=(-3, 103))
        heading = f"ours vs paper, shares: {len(sh)} values"
    ax.set_ylabel("table" if unit == "accuracy" else "reproduced value (ours vs paper)")
    present = {("SPEAR" if t.startswith("spear") else "PACE") for t in tabs}
    handles = [plt.Line2D([], [], marker="o", ls="", color=method_color(p.lower())) for p in sorted(present)]
    labels = [f"ours, {p} tables" for p in sorted(present)]
    if unit == "shares":
        handles.append(plt.Line2D([], [], marker="x", ls="", color="k"))
        labels.append("paper")
    fig.legend(handles, labels, fontsize="small", loc="outside lower center", ncols=len(labels))
    fig.suptitle(title or heading)
    return fig
