"""Colour-vision checks (viz/colour.py) and the palette's figure groups under deuteranopia."""
from __future__ import annotations

import numpy as np
import pytest

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import CLIENT_COLORS, DIRECTION_COLORS, OUTCOME_COLORS
from pace_nb.viz.style import markers, palette
from pace_nb.viz.colour import delta_e, min_delta_e, simulate_cvd, to_lab

#: Methods (palette keys) that share one figure of the gallery, and the smallest ΔE (CIE76, after the
#: Machado 2009 deuteranopia simulation) the palette keeps between any two of them.
FIGURE_GROUPS = {
    "client scaling (PACE Tables 1/8/9)": (("local", "pace", "fedavg", "fedpub"), 40),
    "PACE Table 2 variants": (("local", "transport", "fixed0.5", "mean", "raw", "direct", "pace"), 25),
    "PACE Table 1 baselines": (("local", "pace", "fedavg", "fedprox", "fednova", "fedrcl", "fedpub", "fedtad",
                                "fedgta", "fedaux1r"), 20),
    "SPEAR ablations (Fig. 4)": (("spear", "no_shrinkage", "no_ppr", "no_both"), 40),
    "SPEAR Fig. 2 representations": (("raw features", "spear", "fedavg", "fedproto", "fedgta"), 30),
    "SPEAR Tab. 1 (14 methods; labelled bars)": (("spear", "fedavg", "fedprox", "fedadam", "moon", "fedproto", "fedpub",
                                                  "fedgta", "fedtad", "dense", "fedcvae", "fedsd2c", "ghost", "oasis"), 15),
}


def test_lab_of_reference_colours():
    lab = to_lab(["#ffffff", "#000000", "#ff0000", "#00ff00", "#0000ff"])
    want = [[100, 0, 0], [0, 0, 0], [53.24, 80.09, 67.20], [87.73, -86.18, 83.18], [32.30, 79.19, -107.86]]
    np.testing.assert_allclose(lab, want, atol=0.05)  # CIELAB of the sRGB primaries (D65)
    assert delta_e("#ff0000", "#ff0000") == 0.0


def test_deuteranopia_keeps_greys_and_merges_red_with_green():
    greys = ["#000000", "#777777", "#ffffff"]
    np.testing.assert_allclose(simulate_cvd(greys), [[0, 0, 0], [0x77 / 255] * 3, [1, 1, 1]], atol=2e-3)
    red, green = "#d62728", "#2ca02c"  # the old PACE / FedPub pair of the issue
    seen, normal = min_delta_e([red, green])[0], min_delta_e([red, green], None)[0]
    assert normal > 60 and seen < 15  # distinct for most readers, one olive under deuteranopia
    with pytest.raises(ConfigError, match="colour-vision"):
        simulate_cvd(["#000000"], "nope")


@pytest.mark.parametrize("name", list(FIGURE_GROUPS))
def test_methods_sharing_a_figure_stay_apart_under_deuteranopia(name):
    methods, floor = FIGURE_GROUPS[name]
    PALETTE, MARKERS = palette(), markers()
    d, (i, j) = min_delta_e([PALETTE[m] for m in methods])
    assert d >= floor, f"{name}: {methods[i]} / {methods[j]} ΔE {d:.1f} < {floor}"
    pairs = {(PALETTE[m], MARKERS[m]) for m in methods}
    assert len(pairs) == len(methods), f"{name}: two methods share colour and marker"


def test_outcome_direction_and_client_colours_stay_apart():
    assert min_delta_e(list(OUTCOME_COLORS.values()))[0] > 50  # helped / tied / harmed
    assert min_delta_e(list(DIRECTION_COLORS.values()))[0] > 50  # upload / return
    assert min_delta_e(CLIENT_COLORS[:10])[0] > 10


def test_every_registered_method_has_a_colour_and_marker():
    from pace_nb.methods.registry import registered

    PALETTE = palette()
    names = set(registered().names())
    assert names <= set(PALETTE) and set(PALETTE) == set(markers())
    exclusive = {PALETTE["pace"]: "pace", PALETTE["spear"]: "spear"}
    assert all(exclusive.get(c, m) == m for m, c in PALETTE.items())  # vermillion is PACE's, blue SPEAR's


def test_sweeps_figure_keeps_ablations_and_baselines_apart():
    """SPEAR Fig. 4(a) draws the ablations beside the 13 baselines: no colour is used twice there."""
    keys = FIGURE_GROUPS["SPEAR ablations (Fig. 4)"][0] + FIGURE_GROUPS["SPEAR Tab. 1 (14 methods; labelled bars)"][0]
    colours = [palette()[k].upper() for k in dict.fromkeys(keys)]
    assert len(set(colours)) == len(colours), sorted(colours)


def test_colour_report_measures_legends_of_more_than_eight_series():
    """Ten client lines: in one style the colours alone must tell them apart (ΔE 17 under
    deuteranopia); split over two line styles, only same-style colours are compared (ΔE ≥ 27)."""
    import matplotlib.pyplot as plt

    from pace_nb.viz.check import colour_note, colour_report
    from pace_nb.viz.style import client_dashes, client_palette

    pal, dashes = client_palette(range(10)), client_dashes(range(10))

    def drawn(styled: bool):
        fig, ax = plt.subplots()
        handles = [ax.plot([0, 1], [k, k], color=c, ls="--" if styled and dashes[k] else "-")[0] for k, c in pal.items()]
        fig.legend(handles, [str(k) for k in pal], title="client")
        return fig

    (title, n, plain), = colour_report(drawn(False))
    assert (title, n) == ("client", 10) and plain == pytest.approx(min_delta_e(CLIENT_COLORS[:10])[0])
    (_, _, styled), = colour_report(drawn(True))
    assert styled > 25 > plain
    assert "client: 10 series, smallest ΔE under deuteranopia" in colour_note(drawn(True))
    fig, ax = plt.subplots()
    ax.legend(ax.plot([0, 1], [0, 1], [0, 1], [1, 0]), ["a", "b"])
    assert colour_report(fig) == [] and colour_note(fig) == ""  # eight series or fewer: not measured
    plt.close("all")
