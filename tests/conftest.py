"""Shared test setup: offline data root, quiet progress bars, Agg backend, skip helpers."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SHARED = ROOT.parent / "shared" / "data"
if "PACE_NB_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["PACE_NB_DATA"] = str(_SHARED)
os.environ.setdefault("PACE_NB_PROGRESS", "0")
os.environ.setdefault("MPLBACKEND", "Agg")

DATA_ROOT = Path(os.environ["PACE_NB_DATA"]) if os.environ.get("PACE_NB_DATA") else None
#: small files the tests check against, versioned with them (tests/fixtures/README.md says where each comes from)
FIXTURES = ROOT / "tests" / "fixtures"


def has_dataset(folder: str) -> bool:
    """True when ``$PACE_NB_DATA/<folder>/raw`` exists (e.g. "Cora", "CiteSeer")."""
    return DATA_ROOT is not None and (DATA_ROOT / folder / "raw").is_dir()


def require_dataset(folder: str) -> None:
    """Skip the calling test with a clear reason when the raw files are absent."""
    if not has_dataset(folder):
        pytest.skip(f"{folder} raw files not found under $PACE_NB_DATA ({DATA_ROOT}); "
                    f"see data/README.md for how to place them")


@pytest.fixture(autouse=True)
def private_local_cache(tmp_path_factory, monkeypatch):
    """Each test its own Local-model cache (experiments.local_cache): no test reads another's models."""
    monkeypatch.setenv("PACE_NB_LOCAL_CACHE", str(tmp_path_factory.mktemp("local_cache")))


@pytest.fixture
def results_tmp(tmp_path, monkeypatch):
    """A private results store for one test."""
    d = tmp_path / "results"
    monkeypatch.setenv("PACE_NB_RESULTS", str(d))
    return d


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: intra-op threads only add barrier waits (2 shared cores); restore after."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
