"""Explorers display once: one static figure headless, one live view (controls + figure)
interactive, nothing returned for Jupyter to render again; the live views redraw the figure
that the plain ``*_view_figure`` functions draw for the controls' values."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.viz import frames as views
from pace_nb.viz import widgets
from test_plots import _fg, _local, _logits
from pace_nb.viz.check import figure_problems
from pace_nb.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _close():
    plt.close("all")
    yield
    plt.close("all")


@pytest.fixture
def shown(monkeypatch):
    """Everything the explorers hand to IPython's display, in order."""
    out = []
    monkeypatch.setattr(widgets, "_display", out.append)
    return out


def _rank_rows():
    rows = make_rows("Cora", methods={("local", "native", 0): 0.0, **{("pace", "full", r): float(r) for r in (2, 6, 0)}})
    return rows.assign(bytes_up=1000.0 * (rows["rank"] + 1), bytes_down=800.0)


def _explorers():
    lg = _logits()
    fg = _fg()
    parts, curves = views.partition_frame(fg), views.curves_frame(_local(fg))
    return {"alpha": lambda **kw: widgets.alpha_explorer(lg, views.alpha_paths(lg, 11), **kw),
            "rank": lambda **kw: widgets.rank_explorer(_rank_rows(), **kw),
            "client": lambda **kw: widgets.client_explorer(parts, curves, None, **kw)}


def _png(fig) -> bytes:
    return widgets.figure_png(fig)


@pytest.mark.parametrize("name", ["alpha", "rank", "client"])
@pytest.mark.parametrize("interactive", [False, True])
def test_headless_explorer_shows_exactly_one_static_figure(name, interactive, shown, capsys):
    """No live kernel here: with or without ``interactive``, one figure (rank: plus its
    table), closed afterwards so the inline backend cannot show it again; returns None."""
    assert _explorers()[name](interactive=interactive) is None
    figures = [o for o in shown if isinstance(o, plt.Figure)]
    assert len(figures) == 1 and not plt.get_fignums()
    assert [type(o) for o in shown] == [plt.Figure] + ([pd.DataFrame] if name == "rank" else [])
    assert ("static figure only" in capsys.readouterr().out) == interactive


@pytest.mark.parametrize("name", ["alpha", "rank", "client"])
def test_interactive_explorer_shows_exactly_one_live_view(name, shown, monkeypatch):
    """In a live kernel: one display, the widget box holding the figure image; no static
    figure beside it, no figure left open, and no return value (no second live copy)."""
    monkeypatch.setattr(widgets, "widgets_available", lambda: True)
    assert _explorers()[name](interactive=True) is None
    assert len(shown) == 1 and isinstance(shown[0], w.VBox)
    images = [c for c in shown[0].children if isinstance(c, w.Image)]
    assert len(images) == 1 and bytes(images[0].value).startswith(b"\x89PNG")
    assert not plt.get_fignums()


def test_alpha_widget_redraws_the_figure_of_the_controls():
    lg = _logits()
    paths = views.alpha_paths(lg, 11)
    box = widgets.alpha_widget(lg, paths, receiver=0)
    (pick, slide), image = box.children[0].children, box.children[1]
    assert (pick.value, slide.value) == (0, 0.25)  # receiver 0 starts at its α*
    assert image.value == _png(widgets.alpha_view_figure(lg, paths, 0, 0.25))
    before = image.value
    slide.value = 0.6
    assert image.value != before and image.value == _png(widgets.alpha_view_figure(lg, paths, 0, 0.6))
    pick.value = 1  # a new receiver jumps to its α* (1.0) and redraws once
    assert slide.value == 1.0 and image.value == _png(widgets.alpha_view_figure(lg, paths, 1, 1.0))
    slide.value, pick.value = 0.25, 0  # α already at receiver 0's α*: still redrawn for receiver 0
    assert image.value == _png(widgets.alpha_view_figure(lg, paths, 0, 0.25))
    assert not plt.get_fignums()


def test_rank_widget_redraws_figure_and_table():
    rows = _rank_rows()
    box = widgets.rank_widget(rows, rank=6)
    slide, image, table = box.children[0].children[0], box.children[1], box.children[2]
    assert [v for _, v in slide.options] == [2, 6, 0] and slide.value == 6  # dense last
    assert image.value == _png(widgets.rank_view_figure(rows, 6))
    slide.value = 0
    assert image.value == _png(widgets.rank_view_figure(rows, 0))
    tab = widgets.rank_table(rows)
    shown = widgets.rank_display(tab[tab["rank"] == 0])
    assert shown["rank"].tolist() == ["dense"] and "upload / client (KiB)" in shown.columns
    assert shown["upload / client (KiB)"].iloc[0] == round(tab[tab["rank"] == 0]["bytes_up"].iloc[0] / 1024, 1)
    card = widgets.rank_card(tab, 0)  # one column per dataset, one row per quantity
    assert card.to_html(index=False, border=0) in table.value and "overflow-x:auto" in table.value
    assert list(card.columns) == ["rank dense", "Cora"] and "accuracy (%)" in card["rank dense"].tolist()
    assert card.set_index("rank dense").loc["upload / client (KiB)", "Cora"] == shown["upload / client (KiB)"].iloc[0]
    assert [lab for lab, _ in slide.options] == ["2", "6", "dense"]  # one name for rank 0
    for r in (2, 6, 0):
        assert figure_problems(widgets.rank_view_figure(rows, r)) == []
    assert figure_problems(widgets.alpha_view_figure(_logits(), views.alpha_paths(_logits(), 11), 0, 0.3)) == []
    assert widgets.rank_widget(rows, rank=4).children[0].children[0].value == 2  # not run: first rank


def test_client_widget_redraws_the_chosen_client():
    fg = _fg()
    parts, curves = views.partition_frame(fg), views.curves_frame(_local(fg))
    box = widgets.client_widget(parts, curves, None, client=0)
    pick, image = box.children[0].children[0], box.children[1]
    assert list(pick.options) == [0, 1, 2]
    before = image.value
    pick.value = 2
    assert image.value != before and image.value == _png(widgets.client_view_figure(parts, curves, None, 2))
    assert len(box.children) == 2  # no table row for clients
    assert figure_problems(widgets.client_view_figure(parts, curves, None, 1)) == []


def _gains_axes(fig):
    return next(ax for ax in fig.axes if ax.get_xlabel() == "client, sorted by the difference")


def test_rank_view_per_client_panel_follows_the_rank():
    rows = _rank_rows()  # PACE(rank r) − Local = r points on every client and seed
    rows.loc[(rows.method == "pace") & (rows["rank"] == 6) & (rows.receiver == 1), "acc"] -= 9.0  # client 1 loses 3
    lines = {}
    for r in (2, 6):
        ax = _gains_axes(widgets.rank_view_figure(rows, r))
        data = [ln for ln in ax.lines if len(ln.get_xdata()) > 2]  # the dataset's line (not the zero line)
        assert len(data) == 1 and data[0].get_label() == "Cora"
        lines[r] = data[0].get_ydata().tolist()
        assert any(list(ln.get_ydata()) == [0, 0] for ln in ax.lines)  # the zero line
        mean = np.mean(lines[r])
        assert f"mean {mean:+.2f} points over 3 clients" in ax.get_title() and f"rank {r}:" in ax.get_title()
    assert lines[2] == pytest.approx([2.0, 2.0, 2.0])
    assert lines[6] == pytest.approx([-3.0, 6.0, 6.0])  # sorted, per client
    assert lines[2] != lines[6]
    assert _gains_axes(widgets.rank_view_figure(rows, 2)).get_ylim() == _gains_axes(widgets.rank_view_figure(rows, 6)).get_ylim()
    with pytest.raises(ConfigError, match="rank 4 was not run"):
        widgets.rank_view_figure(rows, 4)


def test_rank_view_says_when_per_client_rows_are_absent():
    rows = _rank_rows()
    rows = rows[rows.receiver < 0]
    fig = widgets.rank_view_figure(rows, 6)
    ax = _gains_axes(fig)
    assert "no per-client rows" in " ".join(t.get_text() for t in ax.texts)
    assert figure_problems(fig) == []


def test_alpha_view_title_gives_local_and_alpha_star_test_accuracy():
    lg = _logits()  # α* = 0.25 (receiver 0), 1.0 (receiver 1)
    paths = views.alpha_paths(lg, 11)
    for r, star in lg.alpha_star.items():
        tm = lg.test_mask[r].numpy()
        zl, ze, y = lg.z_local[r].numpy()[tm], lg.z_external[r].numpy()[tm], lg.y[r].numpy()[tm]
        local = 100 * np.mean(zl.argmax(1) == y)
        pace = 100 * np.mean(((1 - star) * zl + star * ze).argmax(1) == y)
        title = widgets.alpha_view_figure(lg, paths, r, 0.5).axes[0].get_title()
        assert title == f"receiver {r}: test accuracy\nLocal {local:.1f} % → α* {star:.2f}: {pace:.1f} %"
    lg.alpha_star.pop(0)
    assert widgets.alpha_view_figure(lg, paths, 0, 0.5).axes[0].get_title().endswith(f"Local {_local_test_acc(lg, 0):.1f} %")


def _local_test_acc(lg, r):
    tm = lg.test_mask[r]
    return 100 * float((lg.z_local[r][tm].argmax(1) == lg.y[r][tm]).float().mean())
