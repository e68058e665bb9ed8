"""The one figure style: seaborn theme, paper-like sizes, the method palette, saving PNG + PDF.

Every figure of both papers goes through :func:`set_style` and :func:`save_figure`; colours
come from :func:`palette` — each method's ``colour``/``marker`` as its class declares it (read
through the registry) plus the non-method series of :data:`pace_nb.core.schema.SERIES_PALETTE` —
so a method looks the same everywhere.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from collections.abc import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import CLIENT_COLORS, SERIES_MARKERS, SERIES_PALETTE
from pace_nb.methods import registry

COLUMN, FULL, ROW = 3.4, 7.0, 2.5  # inches: one column, full width, one panel row
#: The smallest text of a saved figure, in points (at the figure's own size).
MIN_FONT_PT = 8.0
#: Written where a dataset of the paper's scope has no stored results.
NOT_RUN = "not run"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def set_style(context: str = "paper", font_scale: float = 1.0) -> None:
    """The one figure style of the package (seaborn whitegrid, paper context, 200 dpi): body text
    9.6 pt, ticks and legends 8.8 pt, nothing under :data:`MIN_FONT_PT`."""
    sns.set_theme(context=context, style="whitegrid", font_scale=font_scale, rc={
        "figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight", "axes.titlesize": "medium",
        "axes.titleweight": "bold", "legend.frameon": False, "axes.spines.top": False,
        "axes.spines.right": False, "pdf.fonttype": 42, "figure.constrained_layout.use": True,
        "legend.title_fontsize": "small", "figure.titlesize": "medium"})


def palette() -> dict[str, str]:
    """``{method id or series: colour}``: every registered method's class ``colour`` and the series
    of :data:`~pace_nb.core.schema.SERIES_PALETTE` (PACE variants, SPEAR ablations)."""
    reg = registry.registered()
    return {**SERIES_PALETTE, **{n: c for n in reg.names() if (c := registry.method_colour(n))}}


def markers() -> dict[str, str]:
    """``{method id or series: marker}`` (same keys as :func:`palette`)."""
    reg = registry.registered()
    return {**SERIES_MARKERS, **{n: m for n in reg.names() if (m := registry.method_marker(n))}}


def method_color(method: str) -> str:
    """Colour of a method or series (case-insensitive, aliases resolved; unknown names get a stable colour)."""
    key = str(method).lower()
    colour = registry.method_colour(key) or SERIES_PALETTE.get(key)
    if colour:
        return colour
    pal = sns.color_palette("Dark2", 8).as_hex()
    return pal[sum(map(ord, key)) % len(pal)]


def method_palette(methods: Iterable[str]) -> dict[str, str]:
    return {m: method_color(m) for m in methods}


def method_marker(method: str) -> str:
    """Marker of a method or series (its class's ``marker``; unknown names: a circle)."""
    key = str(method).lower()
    return registry.method_marker(key) or SERIES_MARKERS.get(key, "o")


def client_palette(clients: Iterable) -> dict:
    """Categorical client colours (Paul Tol's muted scheme), in sorted client order."""
    keys = sorted(dict.fromkeys(clients))
    return {k: CLIENT_COLORS[i % len(CLIENT_COLORS)] for i, k in enumerate(keys)}


#: Clients drawn dashed (the others solid): the split of the first ten client colours that keeps the
#: colours of one line style furthest apart under deuteranopia (smallest CIE76 ΔE 27 instead of 17).
DASHED_CLIENTS = frozenset({2, 3, 5, 7, 9})


def client_dashes(clients: Iterable) -> dict:
    """``{client: dash pattern}`` beside :func:`client_palette` (``""`` solid, ``(4, 2)`` dashed), in
    the same sorted order: more than eight client lines stay apart for colour-blind readers."""
    keys = sorted(dict.fromkeys(clients))
    return {k: (4, 2) if i % len(CLIENT_COLORS) in DASHED_CLIENTS else "" for i, k in enumerate(keys)}


def not_run(ax, what: str = NOT_RUN) -> None:
    """Mark an empty panel: the dataset is in the paper's scope but has no stored results."""
    ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="#555555",
            fontsize="medium", fontstyle="italic")


def save_figure(fig, name: str, dir: str | Path = "figures", formats: Sequence[str] = ("png", "pdf"),
                dpi: int = 200) -> list[Path]:
    """Write ``<dir>/<name>.png`` and ``.pdf`` (reproducible metadata); returns the paths."""
    if not _NAME.match(str(name)):
        raise ConfigError(f"figure name {name!r} must be a plain file stem (letters, digits, _ . + -)")
    bad = [f for f in formats if f not in ("png", "pdf", "svg")]
    if bad or not formats:
        raise ConfigError(f"figure formats must be among png, pdf, svg; got {list(formats)}")
    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        meta = {"CreationDate": None} if fmt == "pdf" else {"Software": None} if fmt == "png" else {"Date": None}
        fig.savefig(path, format=fmt, dpi=dpi, metadata=meta)
        paths.append(path)
    return paths


def require_columns(frame: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise ConfigError(f"{what} needs columns {', '.join(missing)}; got {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise ConfigError(f"{what}: nothing to plot (empty frame)")


def subplots(ax=None, nrows: int = 1, ncols: int = 1, **kw):
    """``plt.subplots(nrows, ncols, **kw)``, or — when the caller passes ``ax`` (one Axes, or a
    sequence / array of ``nrows × ncols`` Axes of one figure) — those axes and their figure, shaped
    as ``plt.subplots`` returns them; so every ``plot_*`` draws into a figure of the caller's."""
    if ax is None:
        return plt.subplots(nrows, ncols, **kw)
    axes = np.asarray(ax, dtype=object)
    if axes.size != nrows * ncols:
        raise ConfigError(f"this plot draws {nrows} × {ncols} panel(s); ax holds {axes.size} Axes")
    figs = {id(a.figure) for a in axes.flat}
    if len(figs) != 1:
        raise ConfigError("ax: every Axes must belong to one figure")
    fig = axes.flat[0].figure
    if kw.get("squeeze", True) is False:
        return fig, axes.reshape(nrows, ncols)
    if axes.size == 1:
        return fig, axes.flat[0]
    return fig, axes.reshape(nrows, ncols) if nrows > 1 and ncols > 1 else axes.reshape(-1)


def panel_grid(n: int, ncols: int, width: float = FULL, height: float = ROW, **kw):
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height * nrows), squeeze=False, **kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


@contextlib.contextmanager
def fixed_jitter(seed: int = 0):
    """Seed numpy's global generator inside the block (seaborn's strip-plot jitter draws from it),
    then restore it: the same rows give the same figure, bit for bit."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
