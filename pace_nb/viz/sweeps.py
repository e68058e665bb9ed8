"""SPEAR Fig. 4: accuracy against each swept hyperparameter (β, γ, T, a), in the :mod:`pace_nb.viz.style` style.

Fig. 4(a) — β — gets the full width of the first row (SPEAR and its ablations; beside it, when
given, every compared method at the one β the store holds them for, labelled by name so that no
legend has to carry them); Fig. 4(b) — γ, T, a — the second row, one panel each.
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd

from pace_nb.core.schema import SPEAR_VARIANT_LABELS
from pace_nb.methods.registry import method_label
from pace_nb.viz.style import FULL, ROW, method_color, method_marker, panel_grid, require_columns

_PARAM_LABELS = {"beta": "Dirichlet β", "gamma": "shrinkage γ", "T": "PPR steps T", "a": "propagation weight a",
                 "num_clients": "clients K"}
#: Datasets (or other non-method series) in a sweep: Paul Tol colours clear of the SPEAR variants'.
_SERIES_COLORS = ("#332288", "#CC6677", "#44AA99", "#882255")
_SERIES_MARKERS = ("s", "^", "D", "v")


def _hue_label(hue: str, h, k=None) -> str:
    if hue == "variant":
        return SPEAR_VARIANT_LABELS.get(h, str(h))
    if hue == "method":
        return method_label(h)
    return f"{h} (K = {int(k)})" if hue == "dataset" and k is not None and k == k else str(h)


def _hue_colour(hue: str, h, i: int) -> str:
    if hue in ("method", "variant"):
        return method_color("spear" if h == "full" else h)
    return _SERIES_COLORS[i % len(_SERIES_COLORS)]


def _hue_marker(hue: str, h, i: int) -> str:
    return method_marker("spear" if h == "full" else str(h)) if hue in ("method", "variant") else _SERIES_MARKERS[i % 4]


def _layout(params: list[str], ncols: int, with_baselines: bool):
    """``(fig, {param: Axes}, baselines Axes or None)``: β on a full-width first row (two thirds
    of it when the baselines panel sits beside it), the other parameters on the next row."""
    if "beta" not in params:
        fig, axes = panel_grid(len(params), ncols, height=ROW + 0.6)
        return fig, dict(zip(params, axes, strict=True)), None
    others = [p for p in params if p != "beta"]
    cols = max(len(others), 3 if with_baselines else 1)
    fig = plt.figure(figsize=(FULL, (ROW + 1.0) + (ROW + 0.4 if others else 0)))
    gs = fig.add_gridspec(2 if others else 1, cols, height_ratios=[ROW + 1.0, ROW + 0.4] if others else None)
    axes = {"beta": fig.add_subplot(gs[0, : cols - 1] if with_baselines else gs[0, :])}
    axes.update({p: fig.add_subplot(gs[1, j]) for j, p in enumerate(others)})
    return fig, axes, (fig.add_subplot(gs[0, cols - 1]) if with_baselines else None)


def _baselines_panel(ax, baselines: pd.DataFrame, beta: float) -> None:
    """Every compared method at Dirichlet ``beta`` (SPEAR Tab. 1), named on the axis, best on top;
    SPEAR's value as a line through the panel."""
    b = baselines.dropna(subset=["ours"]).sort_values("ours").reset_index(drop=True)
    for yi, r in b.iterrows():
        std = r["ours_std"] if r["ours_std"] == r["ours_std"] else 0
        ax.errorbar(r["ours"], yi, xerr=std, fmt=method_marker(r["method"]), color=method_color(r["method"]), ms=4,
                    capsize=2)
        if "paper" in b.columns and r["paper"] == r["paper"]:
            ax.scatter([r["paper"]], [yi], marker="x", color="k", s=24, zorder=5)
    spear = b[b["method"] == "spear"]["ours"]
    if len(spear):
        ax.axvline(float(spear.iloc[0]), color=method_color("spear"), ls=":", lw=1)
    ax.set_yticks(range(len(b)), [method_label(m) for m in b["method"]])
    ax.tick_params(axis="y", labelsize="small")
    ax.set_ylim(-0.6, len(b) - 0.4)
    ax.set(xlabel="test accuracy (%)", title=f"every method at β = {beta:g}\n(SPEAR Tab. 1)")
    ax.title.set_fontsize("small")


def plot_sweeps(sweeps: pd.DataFrame, hue: str | Mapping[str, str] = "dataset", ncols: int = 4, title: str = "",
                baselines: pd.DataFrame | None = None, beta: float = 0.05,
                defaults: Mapping[str, float] | None = None) -> plt.Figure:
    """SPEAR Fig. 4: accuracy against each swept hyperparameter, one panel per parameter.
    ``sweeps``: ``param, value, acc`` and the ``hue`` column (dataset, method or variant; a mapping
    param → column gives each panel its own, e.g. β by variant and γ, T, a by dataset); several
    seeds per point give mean ± sample sd error bars. Log x-axis for γ. ``defaults``: param → the
    paper's value, marked by a dotted line. ``baselines``: ``method, ours, ours_std`` (and
    ``paper``) of the compared methods at Dirichlet ``beta`` (SPEAR Tab. 1 entries): Fig. 4(a)
    compares SPEAR with them over β, the store holds them at ``beta`` only — drawn in a panel
    beside β, the β panel saying that the other β were not run for them."""
    hue_of = (lambda p: hue.get(p, "dataset")) if isinstance(hue, Mapping) else (lambda p: hue)
    params = list(dict.fromkeys(sweeps["param"])) if "param" in sweeps.columns else []
    require_columns(sweeps, ["param", "value", "acc", *dict.fromkeys(hue_of(p) for p in params)], "plot_sweeps")
    with_baselines = "beta" in params and baselines is not None and bool(len(baselines))
    fig, axes, base_ax = _layout(params, ncols, with_baselines)
    series: dict[tuple, tuple] = {}  # (column, value) → (colour, marker, label), in order of appearance
    for p in params:
        col = hue_of(p)
        f = sweeps[sweeps["param"] == p]
        for h in dict.fromkeys(f[col]):
            if (col, h) not in series:
                i = sum(c == col for c, _ in series)
                k = f.loc[f[col] == h, "num_clients"].iloc[0] if "num_clients" in f.columns else None
                series[(col, h)] = (_hue_colour(col, h, i), _hue_marker(col, h, i), _hue_label(col, h, k))
    groups: dict[str, tuple[list, list]] = {}  # one legend per hue column
    for (col, _), (c, m, lab) in series.items():
        groups.setdefault(col, ([], []))[0].append(plt.Line2D([], [], color=c, marker=m))
        groups[col][1].append(lab)
    first = next(iter(groups), hue_of(""))
    handles, labels = groups.setdefault(first, ([], []))
    left = {ax for ax in axes.values() if ax.get_subplotspec().colspan.start == 0}
    for p, ax in axes.items():
        col, f = hue_of(p), sweeps[sweeps["param"] == p].astype({"value": float})
        for h in dict.fromkeys(f[col]):
            colour, marker, _ = series[(col, h)]
            g = f[f[col] == h].groupby("value")["acc"].agg(["mean", "std", "count"]).reset_index()
            ax.errorbar(g["value"], g["mean"], yerr=g["std"].where(g["count"] > 1).fillna(0).to_numpy(),
                        color=colour, marker=marker, ms=4, lw=1.2, capsize=2, elinewidth=0.8)
        if defaults and p in defaults:
            ax.axvline(defaults[p], color="0.45", ls=":", lw=1.0, zorder=0)
        if p == "gamma" and (f["value"] > 0).all():
            ax.set_xscale("log")
        if p == "beta":
            on = f["dataset"].unique() if "dataset" in f.columns else []
            ax.set_title((f"{on[0]}: " if len(on) == 1 else "") + "accuracy over β"
                         + (f" (the other methods: β = {beta:g} only, right;\nother β not run for them)"
                            if with_baselines else ""), fontsize="small", fontweight="normal")
        ax.set(xlabel=_PARAM_LABELS.get(p, p), ylabel="test accuracy (%)" if ax in left else "")
    if base_ax is not None and baselines is not None:
        _baselines_panel(base_ax, baselines, beta)
    if defaults:
        handles.append(plt.Line2D([], [], color="0.45", ls=":", lw=1.0))
        labels.append("paper's setting")
    where = {c: ", ".join(_PARAM_LABELS.get(p, p).split()[-1] for p in params if hue_of(p) == c) for c in groups}
    beta_own = "beta" in axes and len(groups) == 2 and hue_of("beta") == first  # β's series: a legend in its panel
    if beta_own:
        ax = axes["beta"]
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo - 0.55 * (hi - lo), hi)  # room under the curves for the legend
        ax.legend(handles, labels, loc="lower center", ncols=min(len(labels), 3), fontsize="small")
    locs = ("outside lower left", "outside lower right") if len(groups) == 2 else ("outside lower center",) * len(groups)
    for loc, (col, (hs, ls)) in zip(locs, groups.items(), strict=True):
        if beta_own and col == first:
            continue
        on = sweeps.loc[sweeps["param"].map(hue_of) == col, "dataset"].unique() if "dataset" in sweeps.columns else []
        title_ = (f"{where[col]} panel{'s' if ',' in where[col] else ''}" + (f" ({on[0]})" if len(on) == 1 else "")
                  if len(groups) > 1 else None)
        fig.legend(hs, ls, loc="outside lower center" if beta_own else loc, ncols=min(len(ls), 5), fontsize="small",
                   title=title_, title_fontsize="small")
    seeds = sweeps["seed"].nunique() if "seed" in sweeps.columns else 1
    spread = ", mean ± sample sd" if seeds > 1 else ""
    fig.suptitle(title or f"SPEAR sensitivity (Fig. 4; {seeds} data seed{'s' if seeds != 1 else ''} per point{spread})")
    return fig

