"""Shared constants and small helpers: paper seeds, devices, progress bars, paths."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, TypeVar

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
    """``"auto"`` → CUDA when available, else CPU."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """Writable cache: argument > ``$PACE_NB_CACHE`` > ``<repo>/data/cache``."""
    p = Path(path) if path else Path(os.environ["PACE_NB_CACHE"]) if os.environ.get("PACE_NB_CACHE") else _default_dir("cache")
    p.mkdir(parents=True, exist_ok=True)
    return p


def results_dir(path: str | os.PathLike | None = None) -> Path:
    """Results store: argument > ``$PACE_NB_RESULTS`` > ``<repo>/data/results``."""
    p = Path(path) if path else Path(os.environ["PACE_NB_RESULTS"]) if os.environ.get("PACE_NB_RESULTS") else _default_dir("results")
    p.mkdir(parents=True, exist_ok=True)
    return p
