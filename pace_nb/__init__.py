"""pace_nb — one-shot federated graph learning: PACE and SPEAR, reproducible.

The public API (imported lazily, so ``import pace_nb`` stays cheap)::

    from pace_nb import build_federated, run_protocol, summarize, run_spear, load_results

Subpackages, in import order: :mod:`~pace_nb.core` → :mod:`~pace_nb.data` → :mod:`~pace_nb.nn`
→ :mod:`~pace_nb.methods` → :mod:`~pace_nb.experiments` / :mod:`~pace_nb.analysis` →
:mod:`~pace_nb.viz` → :mod:`pace_nb.notebooks` / :mod:`pace_nb.cli` (docs/ARCHITECTURE.md).
"""
import importlib as _importlib
import os as _os

# OpenMP threads that busy-wait stall badly when the cores are shared (measured: a 2-thread
# PubMed run 8x slower than 1 thread under load); passive waiting costs nothing when idle.
# Only effective when pace_nb is imported before torch; a user's setting always wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

#: public name → defining module
_API = {
    "PaceNBError": "pace_nb.core.errors",
    "PAPER_SEEDS": "pace_nb.core.config",
    "DATA_SEED": "pace_nb.core.config",
    "load_dataset": "pace_nb.data.datasets",
    "build_federated": "pace_nb.data.federation",
    "FederatedGraph": "pace_nb.data.federation",
    "TrainConfig": "pace_nb.nn.training",
    "train_local": "pace_nb.nn.training",
    "METHODS": "pace_nb.methods.registry",
    "run_protocol": "pace_nb.methods.protocol",
    "run_pace": "pace_nb.methods.pace.protocol",
    "SpearConfig": "pace_nb.methods.spear.core",
    "run_spear": "pace_nb.methods.spear.core",
    "make_method": "pace_nb.methods.baselines",
    "train_federated": "pace_nb.methods.baselines",
    "summarize": "pace_nb.analysis.summary",
    "load_results": "pace_nb.experiments.store",
    "ResultsStore": "pace_nb.experiments.store",
    "run_grid": "pace_nb.experiments.runner",
    "build_tables": "pace_nb.analysis.tables",
}
__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str):
    if name in _API:
        value = getattr(_importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pace_nb' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
