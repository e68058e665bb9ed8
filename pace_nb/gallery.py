"""The committed gallery ``figures/``: the check that it is what the shipped store draws.

:func:`check_gallery` executes the selected notebooks on the shipped store ``results/`` into a
temporary folder (the committed gallery, its executed copies and their stamps are left alone)
and compares every figure drawn with the committed one (:func:`compare_figures`): a figure that
differs, one drawn but not committed, one committed that no notebook draws any more, a PNG
without its PDF. ``pace-nb figures --check`` runs it and exits 1 on any difference.

**What is compared: the PNG's pixels.** A PNG's bytes hold a zlib stream (its compression
depends on the zlib build) and metadata; its pixels are what a reader sees. Drawn again with the
same matplotlib, FreeType and fonts, a figure's pixels are identical bit for bit (the package's
figures have no randomness left: :func:`pace_nb.viz.style.fixed_jitter`, stored UMAP layouts), so
any pixel that differs is a figure that changed — its data, its drawing code or its style. The
PDF is written by the same ``savefig`` call as the PNG (:func:`pace_nb.viz.style.save_figure`) and
is only required to exist. A machine with another FreeType or matplotlib rasterises glyphs
differently and sees every figure differ: run the check where the gallery is drawn.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: How a figure can be out of date, in the order they are listed.
STATUSES = ("differs", "not committed", "not drawn", "no PDF")


@dataclass(frozen=True)
class FigureDiff:
    """One figure of the gallery that is not what the store draws."""

    name: str    # file name of the PNG
    status: str  # one of STATUSES
    detail: str = ""

    def line(self) -> str:
        return f"{self.name}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def png_pixels(path: str | Path) -> np.ndarray:
    """The decoded RGBA pixels of a PNG, ``[height, width, 4]`` uint8."""
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA"))


def pixel_difference(a: str | Path, b: str | Path) -> str | None:
    """None when two PNGs have the same pixels; else what differs (size, or how many pixels)."""
    pa, pb = png_pixels(a), png_pixels(b)
    if pa.shape != pb.shape:
        return f"{pa.shape[1]} × {pa.shape[0]} px committed, {pb.shape[1]} × {pb.shape[0]} px drawn"
    changed = int(np.any(pa != pb, axis=-1).sum())
    if not changed:
        return None
    return f"{changed} of {pa.shape[0] * pa.shape[1]} pixels differ"


def _figures(folder: Path, prefixes: Iterable[str]) -> set[str]:
    """PNG names of ``folder`` (not its subfolders) drawn by the notebooks of these number prefixes."""
    pre = tuple(prefixes)
    return {p.name for p in folder.glob("*.png") if p.is_file() and p.name.startswith(pre)} if folder.is_dir() else set()


def compare_figures(committed: str | Path, fresh: str | Path, prefixes: Iterable[str]) -> list[FigureDiff]:
    """Every difference between the committed gallery and a fresh drawing of it, for the
    notebooks whose figures start with ``prefixes`` ("04_"); empty when they agree."""
    committed, fresh, prefixes = Path(committed), Path(fresh), tuple(prefixes)
    old, new = _figures(committed, prefixes), _figures(fresh, prefixes)
    out = [FigureDiff(n, "not committed", "drawn by its notebook, missing from the gallery") for n in sorted(new - old)]
    out += [FigureDiff(n, "not drawn", "in the gallery, drawn by no notebook") for n in sorted(old - new)]
    for n in sorted(old & new):
        why = pixel_difference(committed / n, fresh / n)
        if why:
            out.append(FigureDiff(n, "differs", why))
    out += [FigureDiff(n, "no PDF", f"{n[:-4]}.pdf missing") for n in sorted(old) if not (committed / f"{n[:-4]}.pdf").is_file()]
    return sorted(out, key=lambda d: (STATUSES.index(d.status), d.name))


def check_gallery(names: Iterable[str] | None = None, *, gallery_dir: str | Path | None = None,
                  notebooks_dir: str | Path | None = None, results_dir: str | None = None,
                  data_root: str | None = None, timeout: int = 900,
                  log: Callable[[str], None] | None = None) -> list[FigureDiff]:
    """Execute the selected notebooks (all by default) on the shipped store into a temporary
    folder and compare their figures with ``gallery_dir`` (default the committed ``figures/``).
    ``results_dir``: the store to draw from (default the shipped ``results/``)."""
    from pace_nb.core.config import shipped_results_dir
    from pace_nb.core.errors import ConfigError
    from pace_nb.notebooks import default_figures_dir, run_notebooks, select_notebooks

    gallery = Path(gallery_dir) if gallery_dir else default_figures_dir()
    store = results_dir or shipped_results_dir()
    if store is None:
        raise ConfigError("no shipped results store (results/) in this checkout: the gallery is drawn from it")
    books = select_notebooks(names, notebooks_dir)
    prefixes = sorted({p.stem.split("_")[0] + "_" for p in books})
    with tempfile.TemporaryDirectory(prefix="pace-nb-gallery-") as tmp:
        fresh = Path(tmp) / "figures"
        run_notebooks([p.stem for p in books], force=True, figures_dir=fresh, build_dir=Path(tmp) / "build",
                      results_dir=str(store), data_root=data_root, notebooks_dir=notebooks_dir, timeout=timeout, log=log)
        return compare_figures(gallery, fresh, prefixes)
