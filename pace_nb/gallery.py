"""The committed gallery ``figures/``: the check that it is what the shipped store draws, and its page.

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

**The page.** ``docs/GALLERY.md`` is generated (:func:`gallery_page`) from ``docs/gallery.toml``,
one entry per figure (file, section, title, caption): each figure at the page's full width with
its caption under it. A figure without an entry, an entry without its figure, and a figure drawn
wider than :data:`MAX_WIDTH_IN` (the page would show it smaller than drawn, its 8 pt text smaller
than 8 pt) are named by the check, as is a page that is not what the entries generate.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: How a figure can be out of date, in the order they are listed.
STATUSES = ("differs", "not committed", "not drawn", "no PDF", "no caption", "no figure", "too wide", "page stale")
#: The gallery's captions and its generated page, relative to the checkout.
CAPTIONS, PAGE = Path("docs") / "gallery.toml", Path("docs") / "GALLERY.md"
#: Widest figure the page shows at no less than its drawn size (GitHub's ~980 px column at 96 px per
#: inch), at the 200 dpi of :func:`pace_nb.viz.style.save_figure`.
MAX_WIDTH_IN, DPI = 10.2, 200


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
        diffs = compare_figures(gallery, fresh, prefixes)
    captions = gallery.parent / CAPTIONS
    if gallery_dir is None and captions.is_file():  # the committed gallery: its page too
        diffs += page_problems(read_captions(captions), gallery, gallery.parent / PAGE)
    return diffs


# ----------------------------------------------------------------------------- the page
@dataclass(frozen=True)
class Entry:
    """One figure of the page: its file under ``figures/``, section, title and caption (markdown)."""

    file: str
    section: str
    title: str
    caption: str


def read_captions(path: str | Path) -> list[Entry]:
    """The entries of ``docs/gallery.toml`` (``[[figure]]`` tables), in order; a malformed entry is a
    :class:`~pace_nb.core.errors.ConfigError` naming it."""
    import tomllib

    from pace_nb.core.errors import ConfigError

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the gallery's captions ({exc})") from None
    out = []
    for i, e in enumerate(data.get("figure", []), 1):
        keys = {f: e.get(f) for f in ("file", "section", "title", "caption")}
        bad = [k for k, v in keys.items() if not isinstance(v, str) or (k != "title" and not v.strip())]
        if bad or set(e) - set(keys):
            raise ConfigError(f"{path}: figure entry {i} ({e.get('file', '?')}) needs text fields file, section, title, "
                              f"caption; wrong or unknown: {', '.join(bad + sorted(set(e) - set(keys)))}")
        out.append(Entry(**keys))
    return out


def gallery_page(entries: list[Entry], figures: str = "../figures") -> str:
    """``docs/GALLERY.md``: every figure at full width, its caption under it, grouped by section."""
    lines = ["# Gallery", "",
             "Every figure of `figures/`, drawn from the shipped results store by `pace-nb figures` (five paper "
             "seeds; Cora, Louvain K = 10, unless noted). This page is generated from `docs/gallery.toml` by the "
             "same command; `pace-nb figures --check` fails when a figure or this page is not what the store draws.",
             ""]
    section = None
    for e in entries:
        if e.section != section:
            section = e.section
            lines += [f"## {section}", ""]
        alt = e.title or e.file[:-4]
        lines += [f"### {alt}", "", f'<img src="{figures}/{e.file}" width="100%" alt="{alt}">', "", e.caption[:1].upper() + e.caption[1:], ""]
    return "\n".join(lines)


def page_problems(entries: list[Entry], figures_dir: str | Path, page: str | Path | None = None) -> list[FigureDiff]:
    """Figures of ``figures_dir`` without an entry, entries without a figure, figures wider than
    :data:`MAX_WIDTH_IN`, and ``page`` (when given) not what :func:`gallery_page` generates."""
    from PIL import Image

    folder = Path(figures_dir)
    drawn = {p.name for p in folder.glob("*.png")} if folder.is_dir() else set()
    named = [e.file for e in entries]
    out = [FigureDiff(n, "no caption", "no entry in docs/gallery.toml") for n in sorted(drawn - set(named))]
    out += [FigureDiff(n, "no figure", "docs/gallery.toml names it; figures/ has no such file")
            for n in sorted(dict.fromkeys(named)) if n not in drawn]
    for n in sorted(drawn & set(named)):
        with Image.open(folder / n) as im:
            width = im.size[0] / DPI
        if width > MAX_WIDTH_IN:
            out.append(FigureDiff(n, "too wide", f"{width:.1f} in drawn, the page shows at most {MAX_WIDTH_IN:g} in"))
    if page is not None and (not Path(page).is_file() or Path(page).read_text(encoding="utf-8") != gallery_page(entries)):
        out.append(FigureDiff(Path(page).name, "page stale", "regenerate it with pace-nb figures"))
    return out


def write_page(root: str | Path) -> Path:
    """Write ``<root>/docs/GALLERY.md`` from ``<root>/docs/gallery.toml``; returns its path."""
    from pace_nb.core.io import atomic_write_text

    page = Path(root) / PAGE
    atomic_write_text(page, gallery_page(read_captions(Path(root) / CAPTIONS)))
    return page
