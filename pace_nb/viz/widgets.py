"""ipywidgets explorers for the notebooks: one view per explorer, never two.

* headless, or ``interactive=False`` — the explorer displays exactly **one static figure**
  (batch runs and exported notebooks show it);
* ``interactive=True`` in a live kernel with ipywidgets — it displays exactly **one live
  view**: the controls above the figure (a PNG in an ``ipywidgets.Image``), redrawn when a
  control moves.

Explorers return ``None`` so that Jupyter has no cell value to render a second time. The
live view itself is built, without displaying it, by the ``*_widget`` builders (tested
without a kernel); the figures by the plain ``*_view_figure`` functions.

* :func:`alpha_explorer` — receiver × α slider: the CNLL path with the chosen α and the
  receiver's predicted class counts at that α (vs Local and the truth).
* :func:`rank_explorer` — rank slider: accuracy and upload / return bytes at that rank, and
  each client's PACE − Local accuracy at that rank.
* :func:`client_explorer` — client selector: the client's split sizes, label counts,
  training curves and Local accuracy.
"""
from __future__ import annotations

import io
from typing import Any
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import DIRECTION_COLORS
from pace_nb.data.datasets import dataset_order
from pace_nb.methods.registry import method_label
from pace_nb.viz.rank_data import RANK_COLUMNS, _ranks, rank_card, rank_display, rank_gains, rank_label, rank_table
from pace_nb.viz.style import FULL, ROW, client_palette, method_color, method_marker

_STAR = "#0072B2"  # α* (as in the static α-path figure)
_DATASET_MARKERS = ("o", "s", "D", "^", "v", "P", "X")

#: What a live view redraws: the figure, and optionally a table shown below it.
View = Callable[[], "tuple[plt.Figure, pd.DataFrame | None]"]


def _display(obj) -> None:
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency
        print(obj)
        return
    display(obj)


def _show(fig) -> None:
    """Display a figure once (and close it so the inline backend does not show it twice)."""
    _display(fig)
    plt.close(fig)


def figure_png(fig) -> bytes:
    """``fig`` as PNG bytes at its own dpi (what the inline backend would show); closes it."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def widgets_available() -> bool:
    """True inside a live IPython kernel with ipywidgets importable."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _want_widgets(interactive: bool) -> bool:
    if not interactive:
        return False
    if not widgets_available():
        print("(no live Jupyter kernel with ipywidgets: showing the static figure only)")
        return False
    return True


def _present(interactive: bool, view: View, widget: Callable[[], Any]) -> None:
    """The one display of an explorer: the live ``widget()`` or the static ``view()``."""
    if _want_widgets(interactive):
        _display(widget())
        return
    fig, table = view()
    _show(fig)
    if table is not None:
        _display(table)


def live_view(controls: Sequence[Any], view: View, watch: Sequence[Any] | None = None):
    """``VBox(controls, Image[, HTML table])`` whose image is ``view()``'s figure, redrawn
    whenever a control in ``watch`` (default: all ``controls``) changes value. Returns the box
    (``box.redraw()`` redraws on demand)."""
    import ipywidgets as w

    image = w.Image(format="png", layout=w.Layout(max_width="100%", height="auto"))  # shrinks to the window
    table = w.HTML(layout=w.Layout(max_width="100%"))

    def redraw(*_):
        fig, tab = view()
        image.value = figure_png(fig)
        table.value = "" if tab is None else ('<div style="max-width:100%;overflow-x:auto">'
                                              + tab.to_html(index=False, border=0) + "</div>")

    for c in (controls if watch is None else watch):
        c.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox(list(controls), layout=w.Layout(flex_flow="row wrap")), image] + ([table] if table.value else []),
                 layout=w.Layout(max_width="100%"))
    box.redraw = redraw
    return box


# ----------------------------------------------------------------------------- α explorer
def alpha_view_figure(logits, paths: pd.DataFrame, receiver: int, alpha: float) -> plt.Figure:
    """Left: the receiver's validation NLL and test accuracy along α with the chosen α and
    α*; right: its predicted class counts on test nodes at α, against Local and the truth."""
    k = len(logits.z_local)
    if not 0 <= receiver < k:
        raise ConfigError(f"receiver {receiver} does not exist (0 … {k - 1})")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ConfigError(f"alpha must lie in [0, 1], got {alpha}")
    f = paths[paths["receiver"] == receiver].sort_values("alpha")
    fig, (a, b) = plt.subplots(1, 2, figsize=(FULL, ROW + 0.6), width_ratios=[1.2, 1])
    a.plot(f["alpha"], f["val_nll"], color="k", label="validation NLL")
    a.set(xlabel="α", ylabel="validation NLL", xlim=(0, 1), title=_alpha_title(logits, receiver))
    tw = a.twinx()
    tw.grid(False)
    tw.plot(f["alpha"], 100 * f["val_acc"], color=method_color("local"), ls="--", label="validation accuracy")
    tw.plot(f["alpha"], 100 * f["test_acc"], color=method_color("pace"), label="test accuracy")
    tw.set_ylabel("accuracy (%)")
    star = logits.alpha_star.get(receiver)
    if star is not None:
        a.axvline(star, color=_STAR, lw=1.2, label=f"CNLL α* = {star:.2f}")
    a.axvline(alpha, color="k", ls=":", lw=1.4, label=f"chosen α = {alpha:.2f}")
    h1, l1 = a.get_legend_handles_labels()
    h2, l2 = tw.get_legend_handles_labels()
    tm = logits.test_mask[receiver]
    y = logits.y[receiver][tm]
    c = logits.z_local[receiver].shape[1]
    pred = logits.blend_predictions(receiver, alpha)[tm]
    local = logits.z_local[receiver][tm].argmax(-1)
    x = np.arange(c)
    for off, vals, lab, col in ((-0.27, y, "true class", "#DDDDDD"), (0.0, local, "Local", method_color("local")),
                                (0.27, pred, f"α = {alpha:.2f}", method_color("pace"))):
        b.bar(x + off, np.bincount(vals.numpy(), minlength=c), width=0.27, label=lab, color=col)
    acc = _test_acc(logits, receiver, alpha)
    changed = int((pred != local).sum())
    b.set(xticks=x, xlabel="class", ylabel="test nodes",
          title=f"predictions: accuracy {acc:.1f} %\n{changed} changed vs Local")
    hb, lb = b.get_legend_handles_labels()
    fig.legend(h1 + h2 + hb, l1 + l2 + lb, fontsize="small", loc="outside lower center", ncols=4)
    return fig


def _test_acc(logits, receiver: int, alpha: float) -> float:
    """Test accuracy (%) of the receiver's blend at ``alpha`` (0: Local itself)."""
    tm = logits.test_mask[receiver]
    y = logits.y[receiver][tm]
    return float((logits.blend_predictions(receiver, alpha)[tm] == y).float().mean()) * 100 if len(y) else float("nan")


def _alpha_title(logits, receiver: int) -> str:
    """"receiver k: test accuracy / Local a % → α* s: b %" (Local only when α* is unknown)."""
    star = logits.alpha_star.get(receiver)
    local = f"{method_label('local')} {_test_acc(logits, receiver, 0.0):.1f} %"
    if star is None:
        return f"receiver {receiver}: test accuracy\n{local}"
    return f"receiver {receiver}: test accuracy\n{local} → α* {star:.2f}: {_test_acc(logits, receiver, star):.1f} %"


def alpha_widget(logits, paths: pd.DataFrame, receiver: int = 0):
    """The live α view (not displayed): a receiver dropdown and an α slider above the figure;
    picking a receiver moves α to its α*."""
    import ipywidgets as w

    start = float(logits.alpha_star.get(receiver, 0.0))
    pick = w.Dropdown(options=list(range(len(logits.z_local))), value=receiver, description="receiver")
    slide = w.FloatSlider(value=start, min=0.0, max=1.0, step=0.01, description="α", continuous_update=False)
    box = live_view([pick, slide], lambda: (alpha_view_figure(logits, paths, pick.value, slide.value), None),
                    watch=[slide])

    def jump(change):
        star = float(logits.alpha_star.get(change["new"], 0.0))
        if slide.value == star:
            box.redraw()
        else:
            slide.value = star  # redraws through the slider

    pick.observe(jump, names="value")
    return box


def alpha_explorer(logits, paths: pd.DataFrame, interactive: bool = False, receiver: int = 0) -> None:
    """Show ``receiver`` at its α* once: the static figure, or with ``interactive`` the live
    view of :func:`alpha_widget`."""
    start = float(logits.alpha_star.get(receiver, 0.0))
    _present(interactive, lambda: (alpha_view_figure(logits, paths, receiver, start), None),
             lambda: alpha_widget(logits, paths, receiver))


# ----------------------------------------------------------------------------- rank explorer
def _gains_panel(ax, rows: pd.DataFrame, rank: int, ranks: list[int], datasets: list[str]) -> None:
    """PACE(rank) − Local per client, sorted, one line per dataset (y range fixed over ranks)."""
    every = {r: rank_gains(rows, r) for r in ranks}
    gains = every[rank]
    names = f"{method_label('pace').replace(' (Ours)', '')} − {method_label('local')}"
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="client, sorted by the difference", ylabel="difference (points)")
    if gains.empty:
        ax.text(0.5, 0.5, "no per-client rows in these results\n(only pooled accuracy)", ha="center", va="center",
                transform=ax.transAxes, fontsize="small")
        ax.set_title(f"rank {rank_label(rank)}: {names} per client")
        return
    for i, ds in enumerate(datasets):
        d = np.sort(gains.loc[gains["dataset"] == ds, "mean_diff"].to_numpy())
        if len(d):
            ax.plot(np.arange(1, len(d) + 1), d, marker=_DATASET_MARKERS[i % len(_DATASET_MARKERS)],
                    ls=("-", "--", "-.", ":")[i % 4], color=method_color("pace"), ms=4, label=ds)
    lo = min(float(g["mean_diff"].min()) for g in every.values() if len(g))
    hi = max(float(g["mean_diff"].max()) for g in every.values() if len(g))
    pad = 0.08 * max(hi - lo, 1.0)
    ax.set_ylim(min(lo, 0.0) - pad, max(hi, 0.0) + pad)  # the same range at every rank: the slider moves the lines
    nd = gains["dataset"].nunique()
    ax.set_title(f"rank {rank_label(rank)}: {names} per client (mean over seeds)\n"
                 f"mean {gains['mean_diff'].mean():+.2f} points over {len(gains)} clients"
                 + (f" of {nd} datasets" if nd > 1 else ""))


def rank_view_figure(rows: pd.DataFrame, rank: int) -> plt.Figure:
    """Top: accuracy and bytes per client against rank, the chosen rank highlighted; bottom:
    at the chosen rank, each client's PACE − Local accuracy (sorted, one line per dataset)."""
    tab = rank_table(rows)
    ranks = _ranks(tab)
    if rank not in ranks:
        raise ConfigError(f"rank {rank} was not run; ranks in these rows: {ranks} (0 = dense)")
    pos = {r: i for i, r in enumerate(ranks)}
    ticks = [rank_label(r) for r in ranks]
    fig, axd = plt.subplot_mosaic([["a", "b"], ["c", "c"]], figsize=(FULL, 2 * ROW + 0.9), height_ratios=[1, 0.9])
    a, b = axd["a"], axd["b"]
    handles, labels = [], []
    datasets = sorted(tab["dataset"].unique(), key=dataset_order)
    for i, ds in enumerate(datasets):
        f = tab[tab["dataset"] == ds]
        f = f.assign(x=f["rank"].map(pos)).sort_values("x")
        mk, ls = _DATASET_MARKERS[i % len(_DATASET_MARKERS)], ("-", "--", "-.", ":")[i % 4]
        a.errorbar(f["x"], f["acc_mean"], yerr=f["acc_std"].fillna(0), marker=mk, ls=ls, capsize=2, ms=4,
                   color=method_color("pace"))
        b.plot(f["x"], f["bytes_up"] / 1024, marker=mk, ls=ls, color=DIRECTION_COLORS["upload"], ms=4)
        b.plot(f["x"], f["bytes_down"] / 1024, marker=mk, ls=ls, color=DIRECTION_COLORS["return"], ms=4)
        handles.append(plt.Line2D([], [], color="#555555", marker=mk, ls=ls))
        labels.append(ds)
    handles += [plt.Line2D([], [], color=method_color("pace"), lw=2), plt.Line2D([], [], color=DIRECTION_COLORS["upload"], lw=2),
                plt.Line2D([], [], color=DIRECTION_COLORS["return"], lw=2)]
    labels += [method_label("pace"), "upload", "return"]
    loc = rows[(rows["method"] == "local") & (rows["receiver"] < 0)]
    if len(loc):
        a.axhline(loc["acc"].mean(), color=method_color("local"), ls="--", lw=1)
        handles.append(plt.Line2D([], [], color=method_color("local"), ls="--"))
        labels.append(f"{method_label('local')} (mean of datasets)")
    sel = tab[tab["rank"] == rank]
    for ax in (a, b):
        ax.axvspan(pos[rank] - 0.3, pos[rank] + 0.3, color="#DDDDDD", alpha=0.8, lw=0)
        ax.set_xticks(range(len(ticks)), ticks)
        ax.set_xlabel("rank r")
    a.set(ylabel="pooled accuracy (%)", title=f"rank {ticks[pos[rank]]}: {sel['acc_mean'].mean():.2f} %\n(mean of datasets)")
    b.set(yscale="log", ylabel="KiB per client", title=f"upload {sel['upload_pct'].mean():.1f} %, "
          f"return {sel['return_pct'].mean():.1f} %\nof dense bytes")
    b.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    b.yaxis.set_minor_formatter("")
    _gains_panel(axd["c"], rows, rank, ranks, datasets)
    fig.legend(handles, labels, fontsize="small", loc="outside lower center", ncols=min(len(labels), 4))
    return fig


def _rank_view(rows: pd.DataFrame, tab: pd.DataFrame, rank: int):
    return rank_view_figure(rows, rank), rank_card(tab, rank)


def rank_widget(rows: pd.DataFrame, rank: int = 6):
    """The live rank view (not displayed): a rank slider above the figure and its table row."""
    import ipywidgets as w

    tab = rank_table(rows)
    ranks = _ranks(tab)
    slide = w.SelectionSlider(options=[(rank_label(r), r) for r in ranks],
                              value=rank if rank in ranks else ranks[0], description="rank",
                              continuous_update=False)
    return live_view([slide], lambda: _rank_view(rows, tab, slide.value))


def rank_explorer(rows: pd.DataFrame, interactive: bool = False, rank: int = 6) -> None:
    """Show ``rank`` (the first run rank if it was not run) once, with its table: static, or
    with ``interactive`` the live view of :func:`rank_widget`."""
    tab = rank_table(rows)
    ranks = _ranks(tab)
    rank = rank if rank in ranks else ranks[0]
    _present(interactive, lambda: _rank_view(rows, tab, rank), lambda: rank_widget(rows, rank))


# ----------------------------------------------------------------------------- client explorer
def client_view_figure(parts: pd.DataFrame, curves: pd.DataFrame | None, rows: pd.DataFrame | None,
                       client: int) -> plt.Figure:
    """One client: label counts per split, its training curves (all seeds) and its Local
    test accuracy per seed. ``parts``: :func:`pace_nb.viz.frames.partition_frame`; ``curves``:
    :func:`pace_nb.viz.frames.curves_frame`; ``rows``: result rows (receiver = client)."""
    if client not in set(parts["client"]):
        raise ConfigError(f"client {client} does not exist (0 … {int(parts['client'].max())})")
    p = parts[parts["client"] == client]
    fig, axes = plt.subplots(1, 3, figsize=(FULL, ROW), width_ratios=[1.2, 1.2, 0.8])
    piv = p.pivot_table(index="class", columns="split", values="count", aggfunc="sum")
    piv = piv[[s for s in ("train", "val", "test") if s in piv.columns]]
    piv.plot.bar(stacked=True, ax=axes[0], color=["#08519c", "#4292c6", "#9ecae1"], width=0.8)
    axes[0].set(xlabel="class", ylabel="nodes", title=f"client {client}: {int(p['count'].sum())} nodes")
    axes[0].tick_params(axis="x", rotation=0)
    axes[0].legend(fontsize="small", title="split")
    if curves is not None and len(curves):
        c = curves[curves["client"] == client]
        pal = client_palette(c["seed"])
        for seed, g in c.groupby("seed"):
            axes[1].plot(g["epoch"], g["loss"], lw=1, color=pal[seed])
        axes[1].set(yscale="log", xlabel="epoch", ylabel="training loss (cross-entropy)",
                    title=f"training ({c['seed'].nunique()} seeds)")
    if rows is not None and len(rows):
        r = rows[(rows["receiver"] == client) & rows["method"].isin(["local", "pace"])]
        pace = r[(r["method"] == "pace") & (r["variant"] == "full")]
        if len(pace):  # one rank: the paper's 6 when present
            pace = pace[pace["rank"] == (6 if (pace["rank"] == 6).any() else pace["rank"].iloc[0])]
        r = pd.concat([r[r["method"] == "local"], pace])
        methods = [m for m in ("local", "pace") if m in set(r["method"])]
        for i, m in enumerate(methods):
            g = r[r["method"] == m]
            axes[2].scatter(np.full(len(g), i), g["acc"], color=method_color(m), marker=method_marker(m), s=14)
            axes[2].hlines(g["acc"].mean(), i - 0.3, i + 0.3, color=method_color(m))
        axes[2].set_xticks(range(len(methods)), [method_label(m).replace(" (Ours)", "") for m in methods])
        axes[2].set(ylabel="test accuracy (%)", title="own test nodes")
    return fig


def client_widget(parts: pd.DataFrame, curves: pd.DataFrame | None = None, rows: pd.DataFrame | None = None,
                  client: int = 0):
    """The live client view (not displayed): a client dropdown above the figure."""
    import ipywidgets as w

    pick = w.Dropdown(options=sorted(parts["client"].unique().tolist()), value=client, description="client")
    return live_view([pick], lambda: (client_view_figure(parts, curves, rows, pick.value), None))


def client_explorer(parts: pd.DataFrame, curves: pd.DataFrame | None = None, rows: pd.DataFrame | None = None,
                    interactive: bool = False, client: int = 0) -> None:
    """Show ``client`` once: static, or with ``interactive`` the live view of :func:`client_widget`."""
    _present(interactive, lambda: (client_view_figure(parts, curves, rows, client), None),
             lambda: client_widget(parts, curves, rows, client))


__all__ = ["RANK_COLUMNS", "rank_card", "rank_gains", "rank_display", "rank_label", "alpha_explorer", "alpha_view_figure", "alpha_widget", "rank_explorer", "rank_table",
           "rank_view_figure", "rank_widget", "client_explorer", "client_view_figure", "client_widget",
           "figure_png", "live_view", "widgets_available"]
