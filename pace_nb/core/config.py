"""Shared constants and small helpers: paper seeds, devices, progress bars, paths."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from collections.abc import Iterable

if TYPE_CHECKING:  # torch is imported where a device is resolved (start-up stays light)
    import torch

T = TypeVar("T")

#: The five run seeds of the PACE paper (vary initialization and dropout only).
PAPER_SEEDS: tuple[int, ...] = (104729, 130363, 155921, 181081, 206639)
#: Data seed: partitions and masks (one mask cache per dataset-client setting).
DATA_SEED: int = 2024


def model_seed(run_seed: int, client: int) -> int:
    """Seed of the dropout generator of model (run seed, client); independent of batching."""
    return (int(run_seed) * 1_000_003 + 7919 * int(client) + 17) % (2**63 - 1)


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; ``cpu``, ``cuda``, ``cuda:i`` (an existing GPU),
    ``mps`` (when available). Anything else is a :class:`~pace_nb.core.errors.ConfigError`."""
    import torch

    from pace_nb.core.errors import ConfigError

    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(f"unknown device {str(device)!r}; valid: auto, cpu, cuda, cuda:<index>, mps") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {str(device)!r} asked for, but CUDA is not available here; use --device cpu or auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device {str(device)!r}: only {torch.cuda.device_count()} CUDA device(s) present")
        return dev
    if dev.type == "mps" and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return dev
    raise ConfigError(f"device {str(device)!r} is not supported or not available; valid: auto, cpu, cuda, cuda:<index>, mps")


def progress(iterable: Iterable[T], enabled: bool = True, **kw) -> Iterable[T]:
    """tqdm progress bar unless disabled (argument or ``PACE_NB_PROGRESS=0``)."""
    if not enabled or os.environ.get("PACE_NB_PROGRESS", "1") == "0":
        return iterable
    from tqdm.auto import tqdm

    kw.setdefault("leave", False)
    kw.setdefault("dynamic_ncols", True)
    return tqdm(iterable, **kw)


def repo_root() -> Path | None:
    """The source checkout holding this package (None when installed elsewhere)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").exists() else None


def _default_dir(sub: str) -> Path:
    root = repo_root()
    return (root / "data" / sub) if root is not None else Path.home() / ".cache" / "pace_nb" / sub


def ensure_dir(p: Path, what: str, hint: str = "") -> Path:
    """Create folder ``p`` (and parents); a file in the way or a read-only place is a ConfigError."""
    from pace_nb.core.errors import ConfigError

    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{what} {p} is a file, not a folder{hint}") from None
    except OSError as exc:
        raise ConfigError(f"cannot create {what} {p} ({exc.strerror or exc}){hint}") from None
    if not p.is_dir():
        raise ConfigError(f"{what} {p} is not a folder{hint}")
    return p


def check_writable(p: Path, what: str, hint: str = "") -> Path:
    """Raise ConfigError unless a file can be created in folder ``p`` (probed, so root and
    read-only file systems are judged alike)."""
    from pace_nb.core.errors import ConfigError
    from pace_nb.core.io import write_probe

    try:
        write_probe(p)
    except OSError as exc:
        raise ConfigError(f"{what} {p} is not writable ({exc.strerror or exc}){hint}") from None
    return p


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """Writable cache: argument > ``$PACE_NB_CACHE`` > ``<repo>/data/cache``."""
    p = Path(path) if path else Path(os.environ["PACE_NB_CACHE"]) if os.environ.get("PACE_NB_CACHE") else _default_dir("cache")
    return ensure_dir(p, "cache folder", "; point $PACE_NB_CACHE at a writable folder")


def user_results_dir(path: str | os.PathLike | None = None) -> Path:
    """The writable results store's path (argument > ``$PACE_NB_RESULTS`` > ``<repo>/data/results``); not created."""
    return Path(path) if path else Path(os.environ["PACE_NB_RESULTS"]) if os.environ.get("PACE_NB_RESULTS") \
        else _default_dir("results")


def results_dir(path: str | os.PathLike | None = None, create: bool = True) -> Path:
    """Results store: argument > ``$PACE_NB_RESULTS`` > ``<repo>/data/results``.

    ``create=False``: the folder must already exist (readers such as ``pace-nb tables``)."""
    p = user_results_dir(path)
    if not create:
        from pace_nb.core.errors import ConfigError

        if not p.is_dir():
            shipped = "" if shipped_results_dir() is not None else f"; {SHIPPED_HINT}"
            raise ConfigError(f"results folder {p} does not exist (run `pace-nb grid CONFIG --results {p}` first"
                              f"{shipped})" if not p.exists() else f"results folder {p} is not a folder")
        return p
    return ensure_dir(p, "results folder", "; pass --results DIR or set $PACE_NB_RESULTS")


def configs_dir() -> Path:
    """The shipped grid configs: the checkout's ``configs/``, else the copy in the installed package
    (``pace_nb/configs``, a link to ``configs/`` in the checkout that the wheel carries as files)."""
    root = repo_root()
    return root / "configs" if root is not None and (root / "configs").is_dir() else Path(__file__).resolve().parents[1] / "configs"


def shipped_configs() -> dict[str, Path]:
    """Name (``quick``) → path of every shipped grid config."""
    d = configs_dir()
    return {p.stem: p for p in sorted(d.glob("*.toml"))} if d.is_dir() else {}


#: where the shipped store is when this package is not run from a checkout (readers' one-line errors)
SHIPPED_HINT = "the shipped store is the folder results/ of a clone of the repository: pass --results <clone>/results"


def shipped_results_dir() -> Path | None:
    """The versioned results store shipped with the checkout (``<repo>/results``), or None."""
    root = repo_root()
    return root / "results" if root is not None and (root / "results").is_dir() else None


def holds_cells(p: str | os.PathLike | None) -> bool:
    """True when folder ``p`` is a results store with at least one committed cell."""
    cells = Path(p) / "cells" if p else None
    return bool(cells is not None and cells.is_dir() and any(cells.glob("*.json")))


def read_results_dir(path: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """Store to READ and whether it is the shipped one: argument > ``$PACE_NB_RESULTS`` >
    ``<repo>/data/results`` when it holds cells > the shipped ``<repo>/results``.

    Nothing is created; writers use :func:`results_dir` (never the shipped store by default)."""
    if path:
        return Path(path), False
    if os.environ.get("PACE_NB_RESULTS"):
        return Path(os.environ["PACE_NB_RESULTS"]), False
    user = _default_dir("results")
    shipped = shipped_results_dir()
    if not holds_cells(user) and shipped is not None and holds_cells(shipped):
        return shipped, True
    return user, False


def count_cells(p: str | os.PathLike | None) -> int:
    """Committed cells (manifests) of the results store at ``p`` (0 when absent)."""
    cells = Path(p) / "cells" if p else None
    return sum(1 for _ in cells.glob("*.json")) if cells is not None and cells.is_dir() else 0


def is_shipped_store(p: str | os.PathLike | None) -> bool:
    """True when ``p`` is the shipped, versioned store ``<repo>/results``."""
    shipped = shipped_results_dir()
    return p is not None and bool(p) and shipped is not None and Path(p).resolve() == shipped.resolve()


def user_store_in_use(path: str | os.PathLike | None = None) -> Path | None:
    """The store other than the shipped one that readers would use (``path``, ``$PACE_NB_RESULTS``,
    or ``data/results`` holding cells or figure data), or None when only the shipped store is read."""
    if path or os.environ.get("PACE_NB_RESULTS"):
        p = user_results_dir(path)
        return None if is_shipped_store(p) else p
    user = _default_dir("results")
    art = user / "artifacts"
    return user if holds_cells(user) or (art.is_dir() and any(art.iterdir())) else None


def store_label(path: str | os.PathLike) -> str:
    """A store as reports name it when the user did not: its path inside the checkout (``results/``,
    so a committed report names no machine path), else the path itself."""
    root, checkout = Path(path), repo_root()
    if checkout is not None and root.resolve().is_relative_to(checkout.resolve()):
        return f"{root.resolve().relative_to(checkout.resolve()).as_posix()}/"
    return str(root)


def store_note(path: str | os.PathLike | None = None) -> str:
    """One line for readers: which store is read, and whether it hides the shipped one."""
    root, _ = read_results_dir(path)
    shipped = shipped_results_dir()
    if is_shipped_store(root):
        return f"results: the shipped store {root} ({count_cells(root)} cells)"
    line = f"results: {root} ({count_cells(root)} cells)"
    if shipped is not None and holds_cells(shipped):
        line += (f"; the shipped store {shipped} ({count_cells(shipped)} cells) is NOT read "
                 f"(pass --results {shipped} to read it)")
    return line
