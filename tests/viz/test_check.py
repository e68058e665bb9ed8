"""The figure check (viz/check.py) catches each defect it names, and passes a clean figure."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from pace_nb.viz.style import method_color
from pace_nb.viz.check import figure_problems
from pace_nb.viz.style import set_style


@pytest.fixture(autouse=True)
def _style():
    set_style()
    yield
    plt.close("all")


def _fig(**kw):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], color=kw.get("colour", method_color("fedavg")), label=kw.get("label", "FedAvg"))
    ax.set(title=kw.get("title", "a title"), xlabel="epoch", ylabel="accuracy (%)")
    return fig, ax


def test_clean_figure_passes():
    fig, ax = _fig()
    ax.legend(loc="lower right", fontsize="small")
    assert figure_problems(fig) == []


def test_small_text_is_caught():
    fig, ax = _fig()
    ax.text(0.5, 0.5, "tiny", fontsize="x-small")
    assert any("'tiny' is" in p and "< 8 pt" in p for p in figure_problems(fig))


def test_code_names_and_raw_columns_are_caught():
    fig, ax = _fig(title="fedavg vs spear")
    ax.set_xlabel("acc_mean")
    probs = figure_problems(fig)
    assert any("'fedavg'" in p and "FedAvg" in p for p in probs) and any("'spear'" in p for p in probs)
    assert any("acc_mean" in p for p in probs)
    fig, ax = _fig(title=r"local training of $\Delta_i$ (FedAvg)")  # English words and math pass
    assert figure_problems(fig) == []


def test_legend_over_the_title_is_caught():
    fig, ax = _fig(title="a long title across the axes top")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 1.12))
    assert any("overlaps the title" in p for p in figure_problems(fig))


def test_method_drawn_off_palette_is_caught():
    fig, ax = _fig(colour="#d62728", label="FedAvg")
    ax.legend(loc="lower right")
    assert any("'FedAvg' drawn in #d62728" in p for p in figure_problems(fig))


def test_panel_titles_wider_than_their_panels_are_caught():
    fig, axes = plt.subplots(1, 4, figsize=(4, 2))
    for i, ax in enumerate(axes):
        ax.plot([0, 1], [0, 1])
        ax.set_title(f"a rather long title of panel {i}")
    assert any("overlap (wider than their panels)" in p for p in figure_problems(fig))


def test_overlapping_tick_labels_are_caught():
    fig, ax = _fig()
    ax.set_xscale("log")
    ax.set_xlim(0.1, 2)
    ax.set_xticks([0.2, 0.25, 1], ["0.2×", "0.25×", "1×"])
    assert any("tick labels '0.2×' and '0.25×' overlap" in p for p in figure_problems(fig))
