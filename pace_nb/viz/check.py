"""What a figure of the package must satisfy, checked on the drawn figure (tests/viz/test_plots.py).

:func:`figure_problems` lists, one line each: text smaller than :data:`~pace_nb.viz.style.MIN_FONT_PT`
at the figure's saved size, a legend overlapping an axes title or the figure title, two titles
overlapping each other (a panel title wider than its panel), overlapping tick labels, a code name
in a label (a registry id such as ``fedavg`` or a raw column such as ``acc_mean`` instead of the
display name), and a legend entry of a method drawn in another colour than the palette's.

:func:`colour_report` measures what a colour-blind reader can tell apart: for every legend of more
than :data:`MANY_SERIES` entries, the smallest CIE76 ΔE after the deuteranopia simulation
(:mod:`pace_nb.viz.colour`) between entries that only their colour tells apart (same line style
and marker).
"""
from __future__ import annotations

import re

import matplotlib.pyplot as plt
from matplotlib.colors import to_hex
from matplotlib.legend import Legend
from matplotlib.text import Text

from pace_nb.viz.style import MIN_FONT_PT, palette

#: Registry ids that are also plain English words (a figure may say "local training").
_WORDS = {"local", "dense", "moon", "mean", "raw", "direct", "transport", "external"}
_MATH = re.compile(r"\$[^$]*\$")
_SNAKE = re.compile(r"\b[a-z]+_[a-z0-9_]+\b")


def _code_names() -> dict[str, str]:
    from pace_nb.methods.registry import method_label, registered

    names = {n: method_label(n) for n in registered().names() if n not in _WORDS}
    return {n: lab for n, lab in names.items() if lab != n}


def _texts(fig: plt.Figure) -> list[Text]:
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        ax = t.axes
        if ax is not None and not ax.get_visible():
            continue
        out.append(t)
    return out


def _handle_colour(h) -> str | None:
    for get in ("get_color", "get_facecolor", "get_markerfacecolor"):
        f = getattr(h, get, None)
        if f is None:
            continue
        c = f()
        if hasattr(c, "ndim") and getattr(c, "ndim", 0) == 2:
            if not len(c):
                continue
            c = c[0]
        try:
            return to_hex(c)
        except (ValueError, TypeError):
            continue
    return None


def figure_problems(fig: plt.Figure) -> list[str]:
    """Problems of a drawn figure (empty when it passes); see the module docstring."""
    from pace_nb.methods.registry import method_label, registered

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # drawn on Agg (pyplot's figures), which has one
    problems: list[str] = []
    texts = _texts(fig)
    codes = _code_names()
    for t in texts:
        s = t.get_text()
        if float(t.get_fontsize()) < MIN_FONT_PT - 0.05:
            problems.append(f"text {s[:40]!r} is {t.get_fontsize():.1f} pt (< {MIN_FONT_PT:g} pt)")
        plain = _MATH.sub("", s)
        for code in codes:
            if re.search(rf"(?<![\w.-]){re.escape(code)}(?![\w-])", plain):
                problems.append(f"text {s[:40]!r} names {code!r} by its code name (display name {codes[code]!r})")
        snake = _SNAKE.findall(plain)
        if snake:
            problems.append(f"text {s[:40]!r} shows raw column name(s) {snake}")
    suptitle = getattr(fig, "_suptitle", None)
    titles = [suptitle] if suptitle is not None else []
    for ax in fig.axes:
        if ax.get_visible():
            titles += [ax.title, ax._left_title, ax._right_title]  # type: ignore[attr-defined]  # matplotlib's own title Texts
    titles = [t for t in titles if t.get_visible() and t.get_text().strip()]
    boxes = [(t, t.get_window_extent(renderer)) for t in titles]
    for i, (t, b) in enumerate(boxes):
        for u, c in boxes[i + 1:]:
            if b.overlaps(c):
                problems.append(f"titles {t.get_text()[:30]!r} and {u.get_text()[:30]!r} overlap (wider than their panels)")
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            boxes_t = [t.get_window_extent(renderer) for t in ticks]
            for k in range(len(ticks) - 1):
                if boxes_t[k].overlaps(boxes_t[k + 1]):
                    problems.append(f"tick labels {ticks[k].get_text()!r} and {ticks[k + 1].get_text()!r} overlap")
    legends = [lg for lg in fig.findobj(Legend) if lg.get_visible()]
    labels = {method_label(n): n for n in registered().names()}
    known = palette()
    for lg in legends:
        box = lg.get_window_extent(renderer)
        for t in titles:
            if box.overlaps(t.get_window_extent(renderer)):
                problems.append(f"legend overlaps the title {t.get_text()[:40]!r}")
        for h, txt in zip(lg.legend_handles, lg.get_texts(), strict=True):
            m = labels.get(txt.get_text())
            colour = _handle_colour(h) if h is not None else None
            if m in known and colour is not None and colour.lower() != known[m].lower():
                problems.append(f"legend entry {txt.get_text()!r} drawn in {colour}, palette has {known[m]}")
    return problems


#: A legend with more series than this gets its colours measured (:func:`colour_report`).
MANY_SERIES = 8


def _look(h) -> tuple[str, str]:
    """What besides colour tells a legend entry apart: its line style and marker."""
    ls = getattr(h, "get_linestyle", lambda: "")()
    marker = getattr(h, "get_marker", lambda: "")()
    return (str(ls), str(marker))


def colour_report(fig: plt.Figure, cvd: str = "deuteranopia") -> list[tuple[str, int, float | None]]:
    """``(legend title, entries, smallest ΔE under cvd)`` for every legend of more than
    :data:`MANY_SERIES` entries; ΔE between entries of the same line style and marker (None: none
    share one, style alone tells them apart)."""
    from pace_nb.viz.colour import min_delta_e

    out = []
    for lg in [lg for lg in fig.findobj(Legend) if lg.get_visible()]:
        entries = [(_handle_colour(h), _look(h)) for h in lg.legend_handles if h is not None]
        entries = [(c, look) for c, look in entries if c is not None]
        if len(entries) <= MANY_SERIES:
            continue
        worst = None
        for look in dict.fromkeys(look for _, look in entries):
            same = [c for c, lk in entries if lk == look]
            if len(same) > 1:
                d = min_delta_e(same, cvd)[0]
                worst = d if worst is None else min(worst, d)
        out.append((lg.get_title().get_text() or "legend", len(entries), worst))
    return out


def colour_note(fig: plt.Figure) -> str:
    """One line per legend of more than :data:`MANY_SERIES` entries (empty when none)."""
    return "; ".join(f"{title}: {n} series, smallest ΔE under deuteranopia "
                     + ("— (line styles tell them apart)" if d is None else f"{d:.1f}") for title, n, d in colour_report(fig))
