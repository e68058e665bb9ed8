"""The method registry: every runnable method, a :class:`~pace_nb.methods.contract.Method`
subclass registered by :func:`~pace_nb.methods.contract.register` in its own module — the
package's own, and those of plugins (:mod:`pace_nb.methods.plugins`, loaded on the first read).

Registry metadata is read from the class: ``needs`` (shared inputs, ``("local",)`` = the
trained Local models), ``description``, ``label`` (display name, as the papers print it),
``labels`` (``{context: label}`` where one paper prints another name, e.g. SPEAR's
"FedOPT (FedAdam)"), ``paper_rows`` (``{table: row}``: the method IS a row of that paper table,
:data:`PAPER_TABLES`; rows only order the table, any numbers do), ``comparison`` (run it in
SPEAR's comparison too, after the paper's rows, which it does not move), ``evaluation``,
``colour`` and ``marker`` (its look in every figure), ``paper``. Every label, colour, list and
table row in the package is read from here (:func:`method_label`, :func:`method_colour`,
:func:`group`, :func:`spear_comparison`, :func:`canonical`).

A method's hyperparameters are the keyword-only arguments of its ``run_method`` that the
protocol does not supply (:data:`PROTOCOL_ARGS`) plus the fields of its ``Config`` dataclass;
:func:`check_method_params` rejects any other name with the valid ones, then the class's
``check_params`` validates the values.

An id is registered once: another class under a registered id (say ``pace``) is an error unless
it is registered with ``override=True`` (re-importing the same module is not another class).
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence

from pace_nb.core.errors import ConfigError, MethodError, PaceNBError, unknown
from pace_nb.core.registry import Entry, Registry

METHODS: Registry = Registry("method")
NEEDS = ("local",)
#: Keyword arguments every runner receives from the protocol (not hyperparameters).
PROTOCOL_ARGS = ("seeds", "device", "progress", "local_logits", "train_config")
#: The paper tables a method can be a row of (``paper_rows``: ``{table: row}``).
PAPER_TABLES: dict[str, str] = {
    "pace_control": "PACE's matched one-round controls (PACE Tables 1, 7)",
    "multiround": "SPEAR's multi-round baselines (SPEAR Tab. 1/3)",
    "oneshot": "SPEAR's one-shot baselines (SPEAR Tab. 1/3)",
}
#: The run-wide options a method may take as ``shared_options`` (``pace-nb run``'s ``--variants``
#: / ``--rank``, a grid's ``pace_variants`` / ``ranks``, a cell's ``variants`` / ``ranks``).
SHARED_OPTIONS = ("variants", "ranks")
#: The ``labels`` context of SPEAR's comparison tables.
SPEAR_CONTEXT = "spear_comparison"


def _same_definition(old: Any, new: Any) -> bool:
    """``new`` is ``old`` or its module re-imported (same module and qualified name)."""
    return old is new or (getattr(old, "__module__", None), getattr(old, "__qualname__", None)) == (
        getattr(new, "__module__", None), getattr(new, "__qualname__", None))


def register_method(name: str, obj: Any, *, aliases: Sequence[str] = (), needs: Sequence[str] = ("local",),
                    description: str = "", defaults: dict | None = None, override: bool = False, **meta: Any):
    """Register the :class:`~pace_nb.methods.contract.Method` subclass ``obj`` (what
    :func:`~pace_nb.methods.contract.register` calls); see the module docstring. Another class
    under a registered id needs ``override=True``."""
    from pace_nb.methods.contract import Method

    if not (isinstance(obj, type) and issubclass(obj, Method)):
        raise ConfigError(f"method {name!r}: a registered method is a pace_nb.methods.contract.Method subclass "
                          f"(register it with @pace_nb.methods.contract.register), got {obj!r}")
    bad = set(needs) - set(NEEDS)
    if bad:
        raise ConfigError(f"unknown method needs {sorted(bad)}; valid: {', '.join(NEEDS)}")
    key = str(name).lower()
    old = METHODS.registered_now(key)
    if old is not None and old.name == key and not override and not _same_definition(old.obj, obj):
        raise ConfigError(f"method id {key!r} is already registered for {_qualname(old.obj)}; to replace it with "
                          f"{_qualname(obj)} register with override=True (@register(override=True))")
    for tag in meta.get("paper_rows", {}):
        if tag not in PAPER_TABLES:
            raise unknown("paper table", tag, PAPER_TABLES)
    return METHODS.register(str(name).lower(), obj, aliases=tuple(aliases), needs=tuple(needs),
                            description=description, defaults=dict(defaults or {}), **meta)


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def runner(entry: Entry) -> Callable:
    """The protocol-signature callable of a registry entry (its class's ``run_method``)."""
    return entry.obj.run_method


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


def parameter_defaults(name: str) -> dict[str, Any]:
    """``{parameter: default}`` of method ``name`` (its ``Config`` fields; a ``run_method``
    keyword without a default maps to None), in :func:`method_parameters` order."""
    entry = METHODS.get(name)
    defaults: dict[str, Any] = {}
    for p in inspect.signature(runner(entry)).parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in PROTOCOL_ARGS:
            defaults[p.name] = None if p.default is inspect.Parameter.empty else p.default
    config = getattr(entry.obj, "Config", None)
    if dataclasses.is_dataclass(config):
        for f in dataclasses.fields(config):
            factory = f.default_factory
            defaults[f.name] = f.default if factory is dataclasses.MISSING else factory()
    return {k: defaults[k] for k in method_parameters(entry.name)}


def describe_methods() -> list[dict[str, Any]]:
    """One record per registered method (plugins included), in registration order: id, aliases,
    label, paper, evaluation, paper_rows, comparison, needs, module and parameters (defaults)."""
    return [{"id": e.name, "aliases": list(e.aliases), "label": e.meta.get("label") or e.name,
             "paper": e.meta.get("paper", ""), "evaluation": e.meta.get("evaluation", ""),
             "paper_rows": dict(e.meta.get("paper_rows") or {}), "comparison": e.name in spear_comparison(),
             "needs": list(e.meta.get("needs", ())), "module": getattr(e.obj, "__module__", ""),
             "parameters": parameter_defaults(e.name)} for e in registered().entries()]


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
    with plugin_errors(entry.name, "its Config"):
        entry.obj.check_params(dict(params))
    return dict(params)


def method_module(name: str) -> str:
    """The module that defines method ``name``'s class (aliases resolved)."""
    return str(getattr(METHODS.get(name).obj, "__module__", "?"))


@contextlib.contextmanager
def plugin_errors(name: str, what: str = "its run") -> Iterator[None]:
    """An exception raised by a method defined outside pace_nb (a plugin) becomes one
    :class:`MethodError` line naming the method and its module; pace_nb's own errors, and the
    exceptions of built-in methods (a bug of ours: its traceback is wanted), pass unchanged."""
    try:
        yield
    except PaceNBError:
        raise
    except Exception as exc:
        module = method_module(name)
        if module == "pace_nb" or module.startswith("pace_nb."):
            raise
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        raise MethodError(f"method {METHODS.key(name)!r} (module {module}): {what} raised "
                          f"{type(exc).__name__}{': ' + text if text else ''}") from exc


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


def registered() -> Registry:
    """:data:`METHODS` with every built-in method registered (imports :mod:`pace_nb.methods`)."""
    import pace_nb.methods  # noqa: F401  (each method module registers itself)

    return METHODS


def canonical(name: str) -> str:
    """The one id of a method (aliases and case resolved); an unregistered name lower-cased."""
    reg = registered()
    return reg.key(name) if name in reg else str(name).lower()


def method_label(name: str, context: str | None = None) -> str:
    """Display name of a method id or alias as the papers print it (``context``: e.g.
    :data:`SPEAR_CONTEXT`, where that paper prints another name); unknown ids as given."""
    reg = registered()
    if name not in reg:
        return str(name)
    meta = reg.get(name).meta
    return (meta.get("labels") or {}).get(context) or meta.get("label") or reg.key(name)


def method_colour(name: str) -> str | None:
    """Colour of a registered method id or alias (its class's ``colour``); None when the name is
    not a registered method or its class declares none."""
    reg = registered()
    return (reg.get(name).meta.get("colour") or None) if name in reg else None


def method_marker(name: str) -> str | None:
    """Marker of a registered method id or alias (its class's ``marker``), else None."""
    reg = registered()
    return (reg.get(name).meta.get("marker") or None) if name in reg else None


def ranked(name: str) -> bool:
    """Whether method ``name``'s rows carry a carrier rank (0 = dense; its class's ``ranked``);
    False for an unregistered name."""
    reg = registered()
    return bool(reg.get(name).meta.get("ranked")) if name in reg else False


def shared_options(name: str) -> tuple[str, ...]:
    """The hyperparameters of method ``name`` that a run or grid sets from its own options (its
    class's ``shared_options``)."""
    return tuple(registered().get(name).meta.get("shared_options", ()))


def with_shared_options(method_params: Mapping[str, Any] | None, methods: Sequence[str],
                        **values: Any) -> dict[str, dict[str, Any]]:
    """``method_params`` (a copy) with every run method's shared options set from ``values``
    (``variants=…, ranks=…``: the run's own options), e.g. PACE's variants and ranks."""
    params = {k: dict(v) for k, v in (method_params or {}).items()}
    for m in methods:
        key = registered().key(m)
        for name in shared_options(key):
            params.setdefault(key, {})[name] = values[name]
    return params


def group(table: str) -> tuple[str, ...]:
    """Ids of the methods that are rows of paper table ``table`` (:data:`PAPER_TABLES`), in row
    order (``paper_rows`` values; ties in registration order)."""
    if table not in PAPER_TABLES:
        raise unknown("paper table", table, PAPER_TABLES)
    members = [(e.meta["paper_rows"][table], i, e.name) for i, e in enumerate(registered().entries())
               if table in (e.meta.get("paper_rows") or {})]
    return tuple(name for _, _, name in sorted(members))


def spear_comparison() -> tuple[str, ...]:
    """SPEAR's comparison: SPEAR, its Tab. 1/3 multi-round then one-shot rows, then every other
    method registered with ``comparison = True`` (in registration order)."""
    paper = ("spear",) + group("multiround") + group("oneshot")
    extra = tuple(e.name for e in registered().entries() if e.meta.get("comparison") and e.name not in paper)
    return paper + extra
