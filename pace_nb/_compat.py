"""Deprecated flat import paths (``pace_nb.models``, ``pace_nb.protocol`` …), kept for one release.

A meta-path finder maps each old module path to its new home and hands back the SAME module
object (so monkeypatching, ``isinstance`` and registries see one module), with a
:class:`DeprecationWarning` naming the new path. Remove in the next release.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module path → new module path (prefixes: submodules follow).
MOVED: dict[str, str] = {
    "pace_nb.errors": "pace_nb.core.errors",
    "pace_nb.config": "pace_nb.core.config",
    "pace_nb.io": "pace_nb.core.io",
    "pace_nb.partition": "pace_nb.data.partition",
    "pace_nb.federation": "pace_nb.data.federation",
    "pace_nb.perturb": "pace_nb.data.perturb",
    "pace_nb.models": "pace_nb.nn.gcn",
    "pace_nb.training": "pace_nb.nn.training",
    "pace_nb.protocol": "pace_nb.methods.protocol",
    "pace_nb.evaluation": "pace_nb.methods.evaluation",
    "pace_nb.metrics": "pace_nb.methods.metrics",
    "pace_nb.calibration": "pace_nb.methods.calibration",
    "pace_nb.pace": "pace_nb.methods.pace.protocol",
    "pace_nb.lowrank": "pace_nb.methods.pace.lowrank",
    "pace_nb.sketch": "pace_nb.methods.pace.sketch",
    "pace_nb.transport": "pace_nb.methods.pace.transport",
    "pace_nb.spear": "pace_nb.methods.spear.core",
    "pace_nb.spear_analysis": "pace_nb.methods.spear.analysis",
    "pace_nb.baselines": "pace_nb.methods.baselines",
    "pace_nb.results": "pace_nb.experiments.store",
    "pace_nb.distributed": "pace_nb.experiments.ray",
    "pace_nb.diagnostics": "pace_nb.analysis.diagnostics",
    "pace_nb.tables": "pace_nb.analysis.tables",
    "pace_nb.paper_values": "pace_nb.analysis.paper_values",
    "pace_nb.plots": "pace_nb.viz.pace",
    "pace_nb.spear_plots": "pace_nb.viz.spear",
    "pace_nb.views": "pace_nb.viz.frames",
    "pace_nb.widgets": "pace_nb.viz.widgets",
    "pace_nb.commands": "pace_nb.cli.commands",
}


def new_path(fullname: str) -> str | None:
    """The new module path of an old one (``None`` when ``fullname`` did not move)."""
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # importlib stamped the alias spec on the real module; give it back its own.
        module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = new_path(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; the old path goes away in the next release",
                      DeprecationWarning, stacklevel=3)
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
