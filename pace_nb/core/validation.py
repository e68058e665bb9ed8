"""Declarative parameter validation: every field of a config dataclass declares what it may hold.

A config dataclass declares each field with :func:`param` — its default and its checks (any one
of them may be satisfied), kept as the field's metadata::

    @declared
    @dataclass(frozen=True)
    class TrainConfig:
        lr: float = param(0.01, Interval(float, 0, None, closed="neither"), help="learning rate")

        def __post_init__(self):
            validate_params(self)

and every entry point (Python API, CLI, grid configs) gets the same check and the same wording:
``TrainConfig: parameter 'lr' must be a float in (0, inf), got nan``. A config written in a file
(a grid config's sections) is read with :mod:`pace_nb.core.reading` on the same declarations. The declaration itself is
checked when the class is created (:func:`declared`; a method's ``Config`` when its class is):
a field without a check, a misspelt metadata key, a check that is not a constraint, a default
its own checks refuse, or a leftover ``_parameter_constraints`` dict is a ``TypeError`` at import.
The helpers below cover the checks shared by the commands: seeds, client counts, name lists.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import MISSING, dataclass, field
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

from pace_nb.core.errors import ConfigError
from pace_nb.core.limits import MAX_CLIENTS, MAX_SEEDS

#: Seeds are non-negative integers that numpy, torch and Python's random all accept.
MAX_SEED = 2**32 - 1


def _bound(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


@dataclass(frozen=True)
class Interval:
    """A finite number of ``kind`` (``int`` or ``float``) in an interval; ``None`` = unbounded."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "both"  # "both" | "left" | "right" | "neither"

    def is_satisfied_by(self, v: Any) -> bool:
        if isinstance(v, bool):
            return False
        if self.kind is int and not isinstance(v, numbers.Integral):
            return False
        if self.kind is float and not isinstance(v, numbers.Real):
            return False
        if not math.isfinite(float(v)):
            return False
        lo_ok = self.left is None or (v >= self.left if self.closed in ("both", "left") else v > self.left)
        hi_ok = self.right is None or (v <= self.right if self.closed in ("both", "right") else v < self.right)
        return lo_ok and hi_ok

    def __str__(self) -> str:
        lb = "[" if self.closed in ("both", "left") and self.left is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        lo = "-inf" if self.left is None else _bound(self.left)
        hi = "inf" if self.right is None else _bound(self.right)
        return f"{'an int' if self.kind is int else 'a float'} in {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: tuple

    def is_satisfied_by(self, v: Any) -> bool:
        try:
            return v in self.values
        except TypeError:
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(map(repr, self.values))


@dataclass(frozen=True)
class Is:
    """An instance of ``kind`` (``None`` allowed when ``kind`` is ``type(None)``)."""

    kind: type | tuple[type, ...]

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, self.kind) and not (self.kind is not bool and isinstance(v, bool)
                                                 and bool not in (self.kind if isinstance(self.kind, tuple) else (self.kind,)))

    def __str__(self) -> str:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        return " or ".join("None" if k is type(None) else k.__name__ for k in kinds)


@dataclass(frozen=True)
class ListOf:
    """A list or tuple whose every item satisfies one of ``items`` (an empty one too: a
    ``validate()`` spanning the fields says when a list needs values)."""

    items: tuple

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, (list, tuple)) and all(any(c.is_satisfied_by(x) for c in self.items) for x in v)

    def __str__(self) -> str:
        return "a list of " + " or ".join(map(str, self.items))


@dataclass(frozen=True)
class Text:
    """A non-empty string."""

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, str) and bool(v.strip())

    def __str__(self) -> str:
        return "a non-empty string"


@dataclass(frozen=True)
class Flag:
    """``True`` or ``False`` only (``"no"`` and ``1`` are not flags)."""

    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, bool)

    def __str__(self) -> str:
        return "true or false"


#: A field whose checks include ``OMITTED`` (its default ``None``) may be left out of a config
#: file; :func:`pace_nb.core.reading.read_config`'s messages leave it unsaid.
OMITTED = Is(type(None))


#: The metadata keys a config field may carry: its checks and what it means (for messages).
CHECK, HELP = "check", "help"
METADATA_KEYS = (CHECK, HELP)


def param(default: Any = MISSING, *checks: Any, help: str = "", default_factory: Any = MISSING) -> Any:
    """A config field: its default and its checks (``value`` is valid when one of them accepts
    it), e.g. ``damping: float = param(0.5, Interval(float, 0, 1))``."""
    meta = {CHECK: tuple(checks), HELP: help} if help else {CHECK: tuple(checks)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def checks_of(cls: type, name: str) -> tuple:
    """The checks field ``name`` of config dataclass ``cls`` declares."""
    return next(f.metadata[CHECK] for f in dataclasses.fields(cls) if f.name == name)


def like(cls: type, name: str, default: Any = MISSING, *more: Any) -> Any:
    """Field ``name`` of config ``cls`` again (its default unless given, its checks and help, and
    ``more`` checks: :data:`OMITTED` for a key a file may leave out), for a config that repeats
    another's parameter (SPEAR's method config, Flower's flat settings, a grid section)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return param(f.default if default is MISSING else default, *f.metadata[CHECK], *more, help=f.metadata.get(HELP, ""))


def check_declaration(cls: type, owner: str | None = None, also: type | None = None) -> None:
    """Raise ``TypeError`` unless every field of dataclass ``cls`` declares valid checks (see the
    module docstring); called when the class is created, so a bad declaration fails at import.
    ``also``: a class holding ``cls`` (a method holding its ``Config``), refused too when it (or
    a base) still carries a ``_parameter_constraints`` dict."""
    owner = owner or cls.__qualname__
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{owner} must be a dataclass whose fields are declared with param(default, *checks)")
    for klass in cls.__mro__ + (also.__mro__ if also is not None else ()):
        if "_parameter_constraints" in vars(klass):
            raise TypeError(f"{klass.__qualname__}._parameter_constraints: checks are declared on each field, "
                            f"e.g. name: float = param(0.5, Interval(float, 0, 1))")
    for f in dataclasses.fields(cls):
        bad = sorted(set(f.metadata) - set(METADATA_KEYS))
        if bad:
            raise TypeError(f"{owner}.{f.name}: unknown field metadata key(s) {bad}; valid: {', '.join(METADATA_KEYS)}")
        checks = f.metadata.get(CHECK)
        if not checks:
            raise TypeError(f"{owner}.{f.name} declares no check; declare it as "
                            f"{f.name} = param(default, <checks>) (pace_nb.core.validation)")
        if not isinstance(checks, tuple) or not all(callable(getattr(c, "is_satisfied_by", None)) for c in checks):
            raise TypeError(f"{owner}.{f.name}: checks must be constraints (Interval, Options, Is, ListOf), got {checks!r}")
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if default is not MISSING and not any(c.is_satisfied_by(default) for c in checks):
            raise TypeError(f"{owner}.{f.name}: its default {default!r} is not {' or '.join(map(str, checks))}")


def declared(cls):
    """Class decorator (above ``@dataclass``): :func:`check_declaration` at class creation."""
    check_declaration(cls)
    return cls


def check_param(owner: str, name: str, value: Any, constraints: Sequence, help: str = "") -> None:
    """Raise :class:`ConfigError` unless ``value`` satisfies one of ``constraints``.

    ``help`` (a field's ``metadata["help"]``) names what the parameter means in the message."""
    if any(c.is_satisfied_by(value) for c in constraints):
        return
    what = " or ".join(map(str, constraints))
    meaning = f" ({name} is the {help})" if help else ""
    raise ConfigError(f"{owner}: parameter {name!r} must be {what}, got {value!r}{meaning}")


def validate_params(obj: Any, owner: str | None = None) -> None:
    """Check every field of dataclass ``obj`` against the checks it declares (:func:`param`)."""
    owner = owner or type(obj).__qualname__
    for f in dataclasses.fields(obj):
        check_param(owner, f.name, getattr(obj, f.name), f.metadata[CHECK], f.metadata.get(HELP, ""))


def config_keys(cls: type) -> set[str]:
    """Field names of a config dataclass: the keys its TOML table accepts."""
    return {f.name for f in dataclasses.fields(cls)}


def config_from_mapping(cls: type, values: Mapping[str, Any], where: str = "config"):
    """Build config dataclass ``cls`` from ``values``; unknown keys are a :class:`ConfigError`."""
    unknown = sorted(set(values) - config_keys(cls))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(sorted(config_keys(cls)))}")
    return cls(**values)


def build_config(owner: str, config_cls: type, hyper: Mapping[str, Any]):
    """``config_cls(**hyper)`` for a method's hyperparameters: unknown names and explicit ``None``
    are a :class:`ConfigError`, then every field is checked (:func:`validate_params`)."""
    fields = config_keys(config_cls)
    unknown = sorted(set(hyper) - fields)
    if unknown:
        raise ConfigError(f"{owner}: unknown parameter(s) {unknown}; valid: {sorted(fields) or 'none'}")
    for k, v in hyper.items():
        if v is None:
            raise ConfigError(f"{owner}: parameter {k!r} is required (got None)")
    cfg = config_cls(**hyper)
    validate_params(cfg, owner)
    return cfg


# -- shared checks (one wording everywhere) --------------------------------------------------
def _duplicated(values: list) -> list:
    """The values occurring more than once, sorted (linear time: long hostile lists stay cheap)."""
    from collections import Counter

    return sorted(v for v, n in Counter(values).items() if n > 1)


def check_seeds(seeds: Iterable[Any], what: str = "seeds") -> tuple[int, ...]:
    """Non-empty, distinct integer seeds in ``[0, 2**32 - 1]``."""
    out = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= int(s) <= MAX_SEED:
            raise ConfigError(f"{what} must be integers in [0, {MAX_SEED}], got {s!r}")
        out.append(int(s))
    if not out:
        raise ConfigError(f"{what}: at least one seed is needed")
    if len(out) > MAX_SEEDS:
        raise ConfigError(f"{what}: {len(out)} seeds asked for; at most {MAX_SEEDS} per run (they train as one batch)")
    dup = _duplicated(out)
    if dup:
        raise ConfigError(f"{what}: duplicated value(s) {dup}")
    return tuple(out)


def check_seed(seed: Any, what: str = "seed") -> int:
    return check_seeds([seed], what)[0]


def check_clients(k: Any, what: str = "number of clients", minimum: int = 1) -> int:
    """A number of clients K: an integer >= ``minimum``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < minimum:
        raise ConfigError(f"{what} must be an integer >= {minimum}, got {k!r}")
    if int(k) > MAX_CLIENTS:
        raise ConfigError(f"{what} must be at most {MAX_CLIENTS}, got {k!r}")
    return int(k)


def check_names(names: Iterable[Any], what: str) -> tuple[str, ...]:
    """A non-empty list of distinct, non-empty names."""
    out = [str(n).strip() for n in names]
    if not out or any(not n for n in out):
        raise ConfigError(f"{what}: expected a non-empty list of names without empty entries, got {list(names)!r}")
    low = [n.lower() for n in out]
    dup = _duplicated(low)
    if dup:
        raise ConfigError(f"{what}: duplicated value(s) {dup}")
    return tuple(out)
