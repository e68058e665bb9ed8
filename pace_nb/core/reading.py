"""Reading a declared config from a file: the sections of a grid config.

A section is a config dataclass declared like any other (:func:`~pace_nb.core.validation.param`,
:func:`~pace_nb.core.validation.declared`); :func:`read_config` reads it from a TOML table /
YAML mapping. A file says more than a keyword call, so a few checks also *read* what they
accept (their ``read(value, what)`` normalises it, or says exactly what is wrong):
:class:`Many` (one value or a list: ``clients = 10`` is ``clients = [10]``), :class:`Table`
(a table of tables: ``method_params``) and :class:`TableFor` (a nested config:
``train = { epochs = 4 }``). Every error is one :class:`FieldError` naming the section and the
key (and the value at fault), so the file's reader can name the line.
"""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any
from collections.abc import Callable, Iterable, Mapping

from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import CHECK, HELP, OMITTED, config_from_mapping, config_keys


class FieldError(ConfigError):
    """A refused config value; ``key`` (the field) and ``value`` (the item at fault, when one
    is) let a file's reader name the line."""

    def __init__(self, message: str, key: str | None = None, value: Any = None):
        super().__init__(message)
        self.key, self.value = key, value


def as_list(v: Any) -> list:
    """A list as it is, a scalar as a one-item list."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


class _Reads:
    """A check that reads: satisfied when :meth:`read` accepts the value."""

    def read(self, v: Any, what: str) -> Any:
        raise NotImplementedError

    def refusal(self, v: Any, what: str) -> FieldError | None:
        """Why :meth:`read` refuses ``v`` (``None``: it does not)."""
        try:
            self.read(v, what)
        except FieldError as exc:
            return exc
        except ConfigError as exc:  # a ``then`` check's own wording (seeds, ranks, names)
            return FieldError(str(exc))
        return None

    def is_satisfied_by(self, v: Any) -> bool:
        return self.refusal(v, "value") is None


@dataclass(frozen=True)
class Many(_Reads):
    """One value or a list of them, read as a tuple: at least one value unless ``empty``; each
    satisfying one of ``items`` (any, when none are given) and mapped by ``convert`` (``float``:
    ``beta = 1`` reads as 1.0); then ``then(values, what)`` checks the whole list and returns it
    normalised (the one wording of seeds, ranks and name lists)."""

    items: tuple = ()
    then: Callable[[list, str], Iterable] | None = None
    convert: Callable[[Any], Any] | None = None
    empty: bool = False

    def read(self, v: Any, what: str) -> tuple:
        vals = as_list(v)
        if not vals and not self.empty:
            raise FieldError(f"{what}: at least one value is needed, got []")
        for x in vals:
            if self.items and not any(c.is_satisfied_by(x) for c in self.items):
                raise FieldError(f"{what} must be {' or '.join(map(str, self.items))}, got {x!r}", value=x)
        if self.convert is not None:
            vals = [self.convert(x) for x in vals]
        return tuple(self.then(vals, what)) if self.then is not None else tuple(vals)

    def __str__(self) -> str:
        return f"one or a list of {' or '.join(map(str, self.items)) or 'values'}"


@dataclass(frozen=True)
class Table(_Reads):
    """A TOML table / YAML mapping whose every value satisfies one of ``values`` (any, when none
    are given; ``each`` says what they are, for messages), read as a ``dict``."""

    values: tuple = ()
    each: str = ""

    def read(self, v: Any, what: str) -> dict:
        if not isinstance(v, Mapping):
            raise FieldError(f"{what} must be {self}, got {v!r}")
        for k, x in v.items():
            if self.values and not any(c.is_satisfied_by(x) for c in self.values):
                raise FieldError(f"{what}.{k} must be {self._each()}, got {x!r}")
        return dict(v)

    def _each(self) -> str:
        return self.each or " or ".join(map(str, self.values))

    def __str__(self) -> str:
        return "a table" + (f" (each value {self._each()})" if self.values else "")


@dataclass(frozen=True)
class TableFor(_Reads):
    """A table of the settings of config dataclass ``cls`` (``train = { epochs = 4 }``): its keys
    are fields of ``cls``, its values what they declare; read as a ``dict``."""

    cls: type

    def read(self, v: Any, what: str) -> dict:
        if not isinstance(v, Mapping):
            raise FieldError(f"{what} must be {self}, got {v!r}")
        try:
            config_from_mapping(self.cls, v, what)
        except ConfigError as exc:  # an unknown key (naming ``what``), or a value ``cls`` refuses
            msg = str(exc)
            raise FieldError(msg if msg.startswith(what) else f"{what}: {msg}") from None
        return dict(v)

    def __str__(self) -> str:
        return f"a table of {self.cls.__name__} settings ({', '.join(sorted(config_keys(self.cls)))})"


def read_value(f: dataclasses.Field, value: Any, what: str) -> Any:
    """``value`` of field ``f`` checked against the checks it declares and read: the first check
    that accepts it reads it (normalised by a check that reads); when it is refused, the one
    check declared (beside :data:`~pace_nb.core.validation.OMITTED`) says exactly why, several
    are named: ``{what} must be <checks>, got <value>``."""
    checks = f.metadata[CHECK]
    for c in checks:
        if c.is_satisfied_by(value):
            return c.read(value, what) if isinstance(c, _Reads) else value
    said = [c for c in checks if c != OMITTED]
    why = said[0].refusal(value, what) if len(said) == 1 and isinstance(said[0], _Reads) else None
    if why is not None:
        raise FieldError(str(why), f.name, why.value)
    help = f.metadata.get(HELP, "")
    meaning = f" ({f.name} is the {help})" if help else ""
    raise FieldError(f"{what} must be {' or '.join(map(str, said))}, got {value!r}{meaning}", f.name,
                     None if isinstance(value, (list, tuple, Mapping)) else value)


def read_config(cls: type, values: Any, where: str, inherit: Mapping[str, Any] | None = None) -> Any:
    """Config dataclass ``cls`` read from a file's ``values``: a mapping whose keys are fields
    (an unknown key names the valid ones; a field without a default is required), every value
    checked and read (:func:`read_value`; ``inherit``: the values of keys left out, from an
    enclosing section), then ``validate()`` when the class has one (raising :class:`FieldError`).
    Every error is a :class:`FieldError` starting with ``where`` or naming it."""
    if not isinstance(values, Mapping):
        raise FieldError(f"{where} must be a table/mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        raise FieldError(f"unknown key {unknown[0]!r} in {where}; valid keys: {', '.join(sorted(fields))}", unknown[0])
    given = {**(inherit or {}), **values}
    missing = [n for n, f in fields.items() if n not in given and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise FieldError(f"every {where} needs {' and '.join(map(repr, missing))}")
    obj = cls(**{k: read_value(fields[k], v, f"{where} {k}") for k, v in given.items()})
    try:
        getattr(obj, "validate", lambda: None)()
    except FieldError as exc:
        raise FieldError(f"{where} {exc}", exc.key, exc.value) from None
    return obj
