"""The method registry: every runnable method, registered by a decorator in its own module.

A registered object is either a function with the protocol signature (see
:mod:`pace_nb.methods.protocol`) or a class exposing it as the classmethod ``run_method``
(every :class:`~pace_nb.methods.baselines.base.FederatedMethod`). Metadata: ``needs``
(shared inputs, ``("local",)`` = the trained Local models), ``description``, ``defaults``
(keyword arguments merged under the user's ``method_params``), ``label`` (display name).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from pace_nb.core.errors import ConfigError
from pace_nb.core.registry import Entry, Registry

METHODS: Registry = Registry("method")
NEEDS = ("local",)


def register_method(name: str, obj: Any = None, *, aliases: Sequence[str] = (), needs: Sequence[str] = ("local",),
                    description: str = "", defaults: dict | None = None, **meta: Any):
    """Register a method (decorator when ``obj`` is omitted); see the module docstring."""
    bad = set(needs) - set(NEEDS)
    if bad:
        raise ConfigError(f"unknown method needs {sorted(bad)}; valid: {', '.join(NEEDS)}")
    return METHODS.register(str(name).lower(), obj, aliases=tuple(aliases), needs=tuple(needs),
                            description=description, defaults=dict(defaults or {}), **meta)


def runner(entry: Entry) -> Callable:
    """The protocol-signature callable of a registry entry."""
    return getattr(entry.obj, "run_method", entry.obj)
