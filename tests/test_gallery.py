"""The gallery's staleness check (``pace-nb figures --check``, :mod:`pace_nb.gallery`): a committed
figure that is not what its notebook draws from the store fails it; regenerating it passes."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pace_nb import gallery
from pace_nb import notebooks as nbr
from pace_nb.cli import main
from pace_nb.viz.style import save_figure


def _draw(folder: Path, name: str, value: float) -> None:
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.bar(["a", "b"], [1, value])
    save_figure(fig, name, folder)
    plt.close(fig)


def test_compare_figures_names_every_kind_of_staleness(tmp_path):
    committed, fresh = tmp_path / "figures", tmp_path / "fresh"
    for folder in (committed, fresh):
        _draw(folder, "01_same", 2.0)
    _draw(committed, "01_bars", 2.0)
    _draw(fresh, "01_bars", 2.5)          # the store's data changed
    _draw(committed, "01_gone", 1.0)      # drawn by no notebook any more
    _draw(fresh, "01_new", 1.0)           # drawn, never committed
    _draw(committed, "02_other", 1.0)     # another notebook's: not compared
    (committed / "01_same.pdf").unlink()
    diffs = gallery.compare_figures(committed, fresh, ["01_"])
    assert [(d.name, d.status) for d in diffs] == [("01_bars.png", "differs"), ("01_new.png", "not committed"),
                                                   ("01_gone.png", "not drawn"), ("01_same.png", "no PDF")]
    assert "pixels differ" in diffs[0].detail
    _draw(fresh, "01_gone", 1.0)
    _draw(committed, "01_bars", 2.5)
    _draw(committed, "01_new", 1.0)
    _draw(committed, "01_same", 2.0)
    assert gallery.compare_figures(committed, fresh, ["01_"]) == []


def test_pixels_not_bytes_are_compared(tmp_path):
    """The same picture in another PNG encoding (compression, metadata) is the same figure."""
    from PIL import Image

    _draw(tmp_path, "01_a", 2.0)
    with Image.open(tmp_path / "01_a.png") as im:
        im.save(tmp_path / "01_b.png", compress_level=1, pnginfo=None)
    assert (tmp_path / "01_a.png").read_bytes() != (tmp_path / "01_b.png").read_bytes()
    assert gallery.pixel_difference(tmp_path / "01_a.png", tmp_path / "01_b.png") is None
    fig, ax = plt.subplots(figsize=(2, 1.6))
    save_figure(fig, "01_c", tmp_path, formats=("png",))
    plt.close(fig)
    assert "px committed" in gallery.pixel_difference(tmp_path / "01_a.png", tmp_path / "01_c.png")


STORE_BODY = """\
import json, pathlib
import matplotlib.pyplot as plt
value = json.loads(pathlib.Path(STORE).read_text())["value"]
fig, ax = plt.subplots(figsize=(2, 1.5))
ax.bar(["a", "b"], [1, value])
fig.savefig(pathlib.Path(figures_dir, "01_bars.png"), dpi=100, metadata=dict(Software=None))
fig.savefig(pathlib.Path(figures_dir, "01_bars.pdf"))"""


@pytest.mark.slow  # three notebook executions
def test_check_fails_on_a_stale_figure_and_passes_after_regeneration(tmp_path):
    """A tiny notebook draws from a 'store' file: the gallery drawn before the store changed is
    stale; ``pace-nb figures`` regenerates it and the check passes."""
    books, figs, store = tmp_path / "nb", tmp_path / "figures", tmp_path / "store.json"
    params = new_code_cell('figures_dir: "Optional[str]" = None  # output folder')
    params.metadata["tags"] = ["parameters"]
    nbformat.write(new_notebook(cells=[params, new_code_cell(STORE_BODY.replace('STORE', repr(str(store))))],
                                metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                         "language": "python"}}), books.mkdir() or books / "01_bars.ipynb")
    regenerate = lambda: nbr.run_notebooks(notebooks_dir=books, figures_dir=figs, build_dir=tmp_path / "build", force=True)
    check = lambda: gallery.check_gallery(gallery_dir=figs, notebooks_dir=books, results_dir=str(tmp_path))
    store.write_text(json.dumps({"value": 2.0}))
    figs.mkdir()
    exec(STORE_BODY.replace("STORE", repr(str(store))), {"figures_dir": str(figs)})  # the gallery, drawn then
    plt.close("all")
    store.write_text(json.dumps({"value": 3.0}))  # the store is re-run: the committed figure is stale
    diffs = check()
    assert [(d.name, d.status) for d in diffs] == [("01_bars.png", "differs")]
    regenerate()
    assert check() == []


def test_cli_check_takes_no_output_options(capsys):
    assert main(["figures", "--check", "--out", "x"]) == 2
    assert "pace-nb: error: --check compares the committed gallery" in capsys.readouterr().err
    assert main(["figures", "--check", "--only", "nope"]) == 2
    assert "unknown notebook 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("status", gallery.STATUSES)
def test_statuses_read_as_lines(status):
    assert gallery.FigureDiff("01_x.png", status, "why").line() == f"01_x.png: {status} (why)"


# ----------------------------------------------------------------------------- the page
ROOT = Path(__file__).resolve().parent.parent


def test_committed_page_is_what_the_captions_generate_and_every_figure_has_one():
    """docs/GALLERY.md: generated from docs/gallery.toml; every committed figure has an entry, every
    entry a figure, and none is drawn wider than the page shows at its size."""
    entries = gallery.read_captions(ROOT / gallery.CAPTIONS)
    assert gallery.page_problems(entries, ROOT / "figures", ROOT / gallery.PAGE) == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/GALLERY.md" in readme


def test_page_names_missing_captions_figures_wide_ones_and_a_stale_page(tmp_path):
    figs = tmp_path / "figures"
    _draw(figs, "01_a", 1.0)
    _draw(figs, "01_b", 1.0)
    fig, ax = plt.subplots(figsize=(11, 1))
    save_figure(fig, "01_wide", figs, formats=("png",))
    plt.close(fig)
    (tmp_path / "g.toml").write_text('[[figure]]\nfile = "01_a.png"\nsection = "S"\ntitle = "A"\ncaption = "a, as drawn."\n'
                                     '[[figure]]\nfile = "01_wide.png"\nsection = "S"\ntitle = ""\ncaption = "wide."\n'
                                     '[[figure]]\nfile = "01_gone.png"\nsection = "T"\ntitle = "G"\ncaption = "gone."\n')
    entries = gallery.read_captions(tmp_path / "g.toml")
    page = gallery.gallery_page(entries)
    assert '<img src="../figures/01_a.png" width="100%" alt="A">\n\nA, as drawn.' in page
    assert page.index("## S") < page.index("### A") < page.index("### 01_wide") < page.index("## T")
    (tmp_path / "GALLERY.md").write_text(page)
    got = [(d.name, d.status) for d in gallery.page_problems(entries, figs, tmp_path / "GALLERY.md")]
    assert got == [("01_b.png", "no caption"), ("01_gone.png", "no figure"), ("01_wide.png", "too wide")]
    (tmp_path / "GALLERY.md").write_text(page + "edited by hand\n")
    assert ("GALLERY.md", "page stale") in [(d.name, d.status) for d in gallery.page_problems(entries, figs, tmp_path / "GALLERY.md")]


def test_malformed_caption_entry_is_one_error_naming_it(tmp_path):
    from pace_nb.core.errors import ConfigError

    (tmp_path / "g.toml").write_text('[[figure]]\nfile = "01_a.png"\nsection = "S"\ncaption = ""\n')
    with pytest.raises(ConfigError, match=r"figure entry 1 \(01_a.png\).*unknown: title, caption"):
        gallery.read_captions(tmp_path / "g.toml")
