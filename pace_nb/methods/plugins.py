"""Methods from outside the package: installed plugins and modules named at run time.

A plugin is a module that registers its methods with
:func:`~pace_nb.methods.contract.register` when it is imported. They are loaded from:

* the entry points of group :data:`ENTRY_POINT_GROUP` (``pace_nb.methods``) of every installed
  distribution — ``myfed = "mypkg.methods"`` in ``[project.entry-points."pace_nb.methods"]`` —,
  and the modules named in ``$PACE_NB_PLUGINS`` (comma-separated): both once, when the method
  registry is first read (:func:`load_plugins`, deferred by :mod:`pace_nb.methods`);
* ``pace-nb --plugin MODULE`` (repeatable or comma-separated): :func:`import_plugins` at start-up,
  also added to ``$PACE_NB_PLUGINS`` so the processes the command starts (Ray workers, Flower
  SuperNodes) load them too.

An entry point may also name a class (``"mypkg.methods:MyMethod"``): it is registered if its
module did not. A plugin that fails to import is one :class:`~pace_nb.core.errors.PluginError`
line naming the module and where it was named.
"""
from __future__ import annotations

import importlib
import os
from importlib.metadata import EntryPoint, entry_points
from collections.abc import Iterable

from pace_nb.core.errors import PaceNBError, PluginError

#: The entry-point group an installed package lists its method modules under.
ENTRY_POINT_GROUP = "pace_nb.methods"
#: Comma-separated plugin modules to import (set by ``pace-nb --plugin`` for child processes).
ENV = "PACE_NB_PLUGINS"


def plugin_names(text: str | Iterable[str] | None) -> list[str]:
    """Module names of a comma-separated list (or several), blanks dropped, order kept, no repeats."""
    parts = [text] if isinstance(text, str) else list(text or ())
    names = [t.strip() for p in parts for t in str(p).split(",") if t.strip()]
    return list(dict.fromkeys(names))


def _failed(module: str, source: str, exc: BaseException) -> PluginError:
    if isinstance(exc, PaceNBError):
        why = str(exc)
    else:
        lines = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return PluginError(f"plugin module {module!r} ({source}) failed to load: {why}")


def import_plugin(module: str, source: str):
    """Import ``module`` (which registers its methods); any failure is one :class:`PluginError`."""
    try:
        return importlib.import_module(module)
    except Exception as exc:
        raise _failed(module, source, exc) from None


def import_plugins(modules: Iterable[str], source: str = "--plugin") -> None:
    """Import the plugin modules named ``modules`` now, and name them in ``$PACE_NB_PLUGINS`` for
    the processes started from here."""
    names = plugin_names(modules)
    for name in names:
        import_plugin(name, source)
    if names:
        os.environ[ENV] = ",".join(plugin_names([os.environ.get(ENV, ""), *names]))


def _load_entry_point(ep: EntryPoint) -> None:
    from pace_nb.methods.contract import Method, register
    from pace_nb.methods.registry import METHODS

    dist = getattr(getattr(ep, "dist", None), "name", None)
    source = f"entry point {ep.name!r}" + (f" of {dist}" if dist else "")
    module = ep.value.partition(":")[0].strip()
    try:
        obj = ep.load()
    except Exception as exc:
        raise _failed(module, source, exc) from None
    if isinstance(obj, type) and issubclass(obj, Method) and obj.name:
        now = METHODS.registered_now(obj.name)
        if now is None or now.obj is not obj:
            try:
                register(obj)
            except PaceNBError as exc:
                raise _failed(module, source, exc) from None


def load_plugins() -> None:
    """Import every installed entry point of :data:`ENTRY_POINT_GROUP`, then ``$PACE_NB_PLUGINS``."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _load_entry_point(ep)
    for name in plugin_names(os.environ.get(ENV)):
        import_plugin(name, f"${ENV}")
