"""The method registry: every runnable method, registered by a decorator in its own module.

A registered object is either a function with the protocol signature (see
:mod:`pace_nb.methods.protocol`) or a class exposing it as the classmethod ``run_method``
(every :class:`~pace_nb.methods.baselines.base.FederatedMethod`). Metadata: ``needs``
(shared inputs, ``("local",)`` = the trained Local models), ``description``, ``defaults``
(keyword arguments merged under the user's ``method_params``), ``label`` (display name),
``check`` (optional: validates a mapping of hyperparameters, raising ``ConfigError``).

A method's hyperparameters are the keyword-only arguments of its runner that the protocol does
not supply (:data:`PROTOCOL_ARGS`) plus the fields of its ``Config`` dataclass (when the object
has one); :func:`check_method_params` rejects any other name with the valid ones.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping, Sequence

from pace_nb.core.errors import ConfigError
from pace_nb.core.registry import Entry, Registry

METHODS: Registry = Registry("method")
NEEDS = ("local",)
#: Keyword arguments every runner receives from the protocol (not hyperparameters).
PROTOCOL_ARGS = ("seeds", "device", "progress", "local_logits", "train_config")


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


def method_parameters(name: str) -> tuple[str, ...]:
    """The hyperparameter names method ``name`` accepts (sorted; see the module docstring)."""
    entry = METHODS.get(name)
    sig = inspect.signature(runner(entry))
    names = {p.name for p in sig.parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in PROTOCOL_ARGS}
    config = getattr(entry.obj, "Config", None)
    if dataclasses.is_dataclass(config):
        names |= {f.name for f in dataclasses.fields(config)}
    return tuple(sorted(names))


def check_method_params(name: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` for method ``name`` checked: a mapping, only known names (else a one-line
    :class:`ConfigError` listing the valid ones), values checked by the method's ``check``."""
    entry = METHODS.get(name)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"method {entry.name!r}: parameters must be a mapping of name to value, got {params!r}")
    valid = method_parameters(entry.name)
    bad = sorted(set(map(str, params)) - set(valid))
    if bad:
        raise ConfigError(f"method {entry.name!r}: unknown parameter(s) {bad}; valid: {', '.join(valid) or 'none'}")
    check = entry.meta.get("check") or getattr(entry.obj, "check_params", None)
    if check is not None:
        check(dict(params))
    return dict(params)


def check_all_method_params(method_params: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``{method: params}`` with every method resolved to its canonical id and its params checked."""
    if method_params is None:
        return {}
    if not isinstance(method_params, Mapping):
        raise ConfigError(f"method_params must be a mapping of method name to parameters, got {method_params!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, params in method_params.items():
        key = METHODS.key(name)
        if key in out:
            raise ConfigError(f"method_params names method {key!r} twice (aliases of one method)")
        out[key] = check_method_params(key, params)
    return out
