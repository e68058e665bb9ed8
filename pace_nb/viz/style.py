"""The one figure style: seaborn theme, paper-like sizes, the method palette, saving PNG + PDF.

Every figure of both papers goes through :func:`set_style` and :func:`save_figure`; colours
come from :data:`pace_nb.core.schema.PALETTE` so a method looks the same everywhere.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import PALETTE

COLUMN, FULL, ROW = 3.4, 7.0, 2.5  # inches: one column, full width, one panel row
METHOD_COLORS = PALETTE
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def set_style(context: str = "paper", font_scale: float = 1.0) -> None:
    """The one figure style of the package (seaborn whitegrid, paper context, 200 dpi)."""
    sns.set_theme(context=context, style="whitegrid", font_scale=font_scale, rc={
        "figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight", "axes.titlesize": "medium",
        "axes.titleweight": "bold", "legend.frameon": False, "axes.spines.top": False,
        "axes.spines.right": False, "pdf.fonttype": 42, "figure.constrained_layout.use": True})


def method_color(method: str) -> str:
    """Colour of a method (case-insensitive; unknown names get a stable colour)."""
    key = str(method).lower()
    if key in METHOD_COLORS:
        return METHOD_COLORS[key]
    pal = sns.color_palette("Dark2", 8).as_hex()
    return pal[sum(map(ord, key)) % len(pal)]


def method_palette(methods: Iterable[str]) -> dict[str, str]:
    return {m: method_color(m) for m in methods}


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
