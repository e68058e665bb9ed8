"""Inside a notebook: :func:`setup_notebook`, the first cell after ``parameters`` — validates the
dataset (a clear :class:`~pace_nb.core.errors.PaceNBError` for an unknown name or missing raw
files), resolves seeds / folders, applies the figure style and returns a :class:`NotebookContext`
whose ``save`` writes ``<figures_dir>/<nb>_<what>_<dataset>.png|pdf``. Re-exported by
:mod:`pace_nb.notebooks`, the notebooks' front door."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

from pace_nb.core.config import PAPER_SEEDS, repo_root, resolve_device
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import check_clients, check_seeds
from pace_nb.methods.pace.lowrank import check_ranks

@dataclass
class NotebookContext:
    """Resolved parameters of one notebook run (what the cells use)."""

    notebook: str
    dataset: str
    clients: int
    seeds: tuple[int, ...]
    rank: int
    device: str
    interactive: bool
    data_root: str | None
    results_dir: str | None
    figures_dir: Path
    saved: list[Path] = field(default_factory=list)
    figure_data: dict[str, str] = field(default_factory=dict)  # name → "stored" (read) | "computed"
    takes_rank: bool = True  # False: the notebook declares no rank (``rank`` keeps the default, unused)

    def cached(self, name: str, compute, **params):
        """``compute()`` (a DataFrame or a dict of arrays) as stored figure data
        (:mod:`pace_nb.experiments.artifacts`): read when it was stored before for this notebook,
        dataset, clients, seeds, rank and ``params``; else computed and stored for the next run."""
        from pace_nb.experiments.artifacts import cached

        base = {"dataset": self.dataset, "clients": self.clients, "seeds": list(self.seeds), "rank": self.rank}
        ran = []

        def compute_and_note():
            ran.append(1)
            return compute()

        value = cached(self.notebook, name, {**base, **params}, compute_and_note, self.results_dir)
        self.figure_data[name] = "computed" if ran else "stored"
        return value

    def save(self, fig, what: str, dataset: bool = True) -> None:
        """Save ``fig`` as ``<notebook prefix>_<what>[_<dataset>]`` (PNG + PDF; paths appended
        to ``saved``) and keep it open so that it still shows inline."""
        from pace_nb.viz.style import save_figure

        from pace_nb.viz.check import colour_note

        stem = "_".join([self.notebook.split("_")[0], what] + ([self.dataset] if dataset else []))
        self.saved.extend(save_figure(fig, stem, self.figures_dir))
        note = colour_note(fig)
        if note:  # more than eight series: what a colour-blind reader can tell apart
            print(f"{stem}: {note}")

    def describe(self) -> str:
        rank = f"rank={self.rank}, " if self.takes_rank else ""
        return (f"{self.notebook}: dataset={self.dataset}, clients={self.clients}, seeds={list(self.seeds)}, "
                f"{rank}device={self.device}, figures → {self.figures_dir}")

    def figure_data_note(self) -> str:
        """Which figure data this run read from the store and which it computed."""
        got = {k: [n for n, v in self.figure_data.items() if v == k] for k in ("stored", "computed")}
        return "; ".join(f"{k}: {', '.join(v)}" for k, v in got.items() if v) or "no figure data"


def resolve_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """``seeds``: how many of the paper's run seeds (an int 1–5) or an explicit list."""
    if isinstance(seeds, bool):
        raise ConfigError(f"seeds must be a count (1–{len(PAPER_SEEDS)}) or a list of ints, got {seeds!r}")
    if isinstance(seeds, int):
        if not 1 <= seeds <= len(PAPER_SEEDS):
            raise ConfigError(f"seeds = {seeds}: give a count between 1 and {len(PAPER_SEEDS)} "
                              f"(the paper's seeds {PAPER_SEEDS}) or an explicit list")
        return PAPER_SEEDS[:seeds]
    return check_seeds(seeds, "seeds")


def default_figures_dir() -> Path:
    root = repo_root()
    return (root / "figures") if root is not None else Path("figures").resolve()


def notebook_figures_dir(results_dir: str | None = None) -> Path:
    """Where a notebook run without ``figures_dir`` saves: the committed gallery when only the shipped
    store is read, else ``figures/own`` (git-ignored), so another store never overwrites the gallery."""
    from pace_nb.core.config import user_store_in_use

    return default_figures_dir() / "own" if user_store_in_use(results_dir) is not None else default_figures_dir()


def setup_notebook(notebook: str, dataset: str, *, clients: int = 10, seeds: int | Sequence[int] = 5,
                   rank: int | None = None, device: str = "auto", interactive: bool = False,
                   data_root: str | None = None, results_dir: str | None = None,
                   figures_dir: str | None = None) -> NotebookContext:
    """Validate a notebook's parameters and prepare its run (style, folders). A notebook passes
    only the parameters it declares; the others keep these defaults (``rank`` None: the notebook
    takes no rank; the context keeps the paper's r = 6 and does not print it).

    Raises :class:`~pace_nb.core.errors.UnknownNameError` for an unknown dataset and
    :class:`~pace_nb.core.errors.MissingDataError` (naming the folder and files) when its raw
    files are absent — before any work starts."""
    from pace_nb.data.datasets import canonical_name, get_spec, missing_files, raw_dir
    from pace_nb.core.errors import MissingDataError
    from pace_nb.viz.style import set_style

    name = canonical_name(dataset)
    if get_spec(name).needs_files:
        miss = missing_files(name, data_root)
        if miss:
            raise MissingDataError(
                f"raw files for {name} not found in {raw_dir(name, data_root)} (missing: {', '.join(miss)}); "
                f"set data_root= (or $PACE_NB_DATA) to a folder holding {get_spec(name).folder}/raw, "
                f"or run with dataset='demo'")
    check_clients(clients, "clients", minimum=2)
    takes_rank = rank is not None
    rank = 6 if rank is None else rank
    check_ranks([rank], "rank")
    dev = str(resolve_device(device))
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    set_style()
    figs = Path(figures_dir) if figures_dir else notebook_figures_dir(results_dir)
    figs.mkdir(parents=True, exist_ok=True)
    return NotebookContext(notebook, name, clients, resolve_seeds(seeds), rank, dev, bool(interactive),
                           data_root, results_dir, figs, takes_rank=takes_rank)
