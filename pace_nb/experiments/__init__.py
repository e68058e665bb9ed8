"""Layer 4: grid configs and runner, the results store, Ray scale-out."""
from __future__ import annotations

#: Names of the former flat module ``pace_nb.experiments`` (now :mod:`pace_nb.experiments.grid`),
#: still importable from here for one release, with a DeprecationWarning.
_MOVED_TO_GRID = ("PARTITIONS", "SECTIONS", "GRID_KEYS", "EXPERIMENT_KEYS", "SPEAR_KEYS", "Cell", "GridConfig",
                  "load_config", "parse_config", "expand", "run_cell", "GridReport", "run_grid")


def __getattr__(name: str):
    if name in _MOVED_TO_GRID:
        import importlib
        import warnings

        warnings.warn(f"pace_nb.experiments.{name} moved to pace_nb.experiments.grid.{name}; "
                      "the old path goes away in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("pace_nb.experiments.grid"), name)
    raise AttributeError(f"module 'pace_nb.experiments' has no attribute {name!r}")
