"""Declarative parameter validation, in the style of scikit-learn's ``_parameter_constraints``.

A config dataclass declares, once, what each field may hold::

    @dataclass(frozen=True)
    class TrainConfig:
        _parameter_constraints: ClassVar[dict] = {"lr": [Interval(float, 0, None, closed="neither")]}
        lr: float = 0.01

        def __post_init__(self):
            validate_params(self)

and every entry point (Python API, CLI, grid configs) gets the same check and the same wording:
``TrainConfig: parameter 'lr' must be a float in (0, inf), got nan``. The helpers below cover
the checks shared by the commands: seeds, client counts, ranks, name lists.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

from pace_nb.core.errors import ConfigError
from pace_nb.core.limits import MAX_CLIENTS, MAX_RANK, MAX_SEEDS

#: Seeds are non-negative integers that numpy, torch and Python's random all accept.
MAX_SEED = 2**32 - 1


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
        lo = "-inf" if self.left is None else f"{self.left:g}"
        hi = "inf" if self.right is None else f"{self.right:g}"
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


def check_param(owner: str, name: str, value: Any, constraints: Sequence, help: str = "") -> None:
    """Raise :class:`ConfigError` unless ``value`` satisfies one of ``constraints``.

    ``help`` (a field's ``metadata["help"]``) names what the parameter means in the message."""
    if any(c.is_satisfied_by(value) for c in constraints):
        return
    what = " or ".join(map(str, constraints))
    meaning = f" ({name} is the {help})" if help else ""
    raise ConfigError(f"{owner}: parameter {name!r} must be {what}, got {value!r}{meaning}")


def validate_params(obj: Any, constraints: Mapping[str, Sequence] | None = None) -> None:
    """Check every field of dataclass ``obj`` against ``type(obj)._parameter_constraints``."""
    constraints = type(obj)._parameter_constraints if constraints is None else constraints
    owner = type(obj).__qualname__
    for f in dataclasses.fields(obj):
        if f.name in constraints:
            check_param(owner, f.name, getattr(obj, f.name), constraints[f.name], f.metadata.get("help", ""))


def config_keys(cls: type) -> set[str]:
    """Field names of a config dataclass: the keys its TOML table accepts."""
    return {f.name for f in dataclasses.fields(cls)}


def config_from_mapping(cls: type, values: Mapping[str, Any], where: str = "config"):
    """Build config dataclass ``cls`` from ``values``; unknown keys are a :class:`ConfigError`."""
    unknown = sorted(set(values) - config_keys(cls))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(sorted(config_keys(cls)))}")
    return cls(**values)


def merged_constraints(cls: type) -> dict:
    """``_parameter_constraints`` merged along ``cls``'s MRO (a subclass overrides its bases)."""
    out: dict = {}
    for klass in reversed(cls.__mro__):
        out.update(klass.__dict__.get("_parameter_constraints", {}))
    return out


def build_config(owner: str, config_cls: type, hyper: Mapping[str, Any], constraints: Mapping[str, Sequence]):
    """``config_cls(**hyper)`` for a method's hyperparameters: unknown names and explicit ``None``
    are a :class:`ConfigError`, then every field named in ``constraints`` is checked."""
    fields = config_keys(config_cls)
    unknown = sorted(set(hyper) - fields)
    if unknown:
        raise ConfigError(f"{owner}: unknown parameter(s) {unknown}; valid: {sorted(fields) or 'none'}")
    for k, v in hyper.items():
        if v is None:
            raise ConfigError(f"{owner}: parameter {k!r} is required (got None)")
    cfg = config_cls(**hyper)
    for name, allowed in constraints.items():
        if name in fields:
            check_param(owner, name, getattr(cfg, name), allowed)
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


def check_ranks(ranks: Iterable[Any], what: str = "ranks") -> tuple[int, ...]:
    """Distinct carrier ranks: integers >= 1, or 0 for dense carriers."""
    out = []
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or not 0 <= int(r) <= MAX_RANK:
            raise ConfigError(f"{what} must be integers in [1, {MAX_RANK}] (0 = dense), got {r!r}")
        out.append(int(r))
    if not out:
        raise ConfigError(f"{what}: at least one value is needed")
    if len(set(out)) != len(out):
        raise ConfigError(f"{what}: duplicated value(s) {_duplicated(out)}")
    return tuple(out)


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
