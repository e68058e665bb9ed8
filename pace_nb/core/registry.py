"""One registry mechanism for every pluggable name: methods, datasets, tables.

A :class:`Registry` maps canonical names (looked up case-insensitively, with aliases) to
objects plus free-form metadata. Register with a decorator in the module that defines the
object::

    METHODS = Registry("method")

    @METHODS.register("fedavg", aliases=("fed-avg",), description="FedAvg (McMahan et al. 2017)")
    class FedAvg(FederatedMethod): ...

An unknown name raises :class:`~pace_nb.core.errors.UnknownNameError` listing the valid ones.
A registry can :meth:`~Registry.defer` work to its first read (the method registry loads the
installed plugins then, once).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from collections.abc import Callable, Iterator, Mapping

from pace_nb.core.errors import ConfigError, unknown

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered object: canonical ``name``, the object, its aliases and metadata."""

    name: str
    obj: T
    aliases: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Canonical name → :class:`Entry`; lookups are case-insensitive and follow aliases."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}
        self._lookup: dict[str, str] = {}
        self._deferred: list[Callable[[], object]] = []

    def defer(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` once, just before the next read (a lookup, a listing); registering does not
        trigger it, and a read from inside ``fn`` sees the registry as it is."""
        self._deferred.append(fn)

    def _ready(self) -> None:
        while self._deferred:
            self._deferred.pop(0)()

    def register(self, name: str, obj: T | None = None, *, aliases: tuple[str, ...] = (),
                 **meta: Any) -> T | Callable[[T], T]:
        """Register ``obj`` under ``name`` (decorator when ``obj`` is omitted).

        Registering a name again replaces its entry in place (a re-imported module, a user
        override; :func:`pace_nb.methods.registry.register_method` asks an override to say so); an alias that already points at ANOTHER name is a :class:`ConfigError`."""

        def add(o: T) -> T:
            keys = [str(name)] + [str(a) for a in aliases]
            for k in keys:
                owner = self._lookup.get(k.lower())
                if owner is not None and owner != name:
                    raise ConfigError(f"{self.kind} name {k!r} is already registered for {owner!r}")
            old = self._entries.get(name)  # replaced in place: the registration order stays
            if old is not None:
                for a in old.aliases:
                    self._lookup.pop(a.lower(), None)
            self._entries[name] = Entry(name, o, tuple(aliases), dict(meta))
            for k in keys:
                self._lookup[k.lower()] = name
            return o

        return add if obj is None else add(obj)

    def key(self, name: str) -> str:
        """Canonical name of ``name`` (case-insensitive, aliases followed)."""
        self._ready()
        key = self._lookup.get(str(name).lower())
        if key is None:
            raise unknown(self.kind, name, self._entries)
        return key

    def get(self, name: str) -> Entry[T]:
        return self._entries[self.key(name)]

    def __getitem__(self, name: str) -> T:
        return self.get(name).obj

    def __contains__(self, name: object) -> bool:
        self._ready()
        return str(name).lower() in self._lookup

    def __iter__(self) -> Iterator[str]:
        self._ready()
        return iter(self._entries)

    def __len__(self) -> int:
        self._ready()
        return len(self._entries)

    def names(self) -> list[str]:
        """Canonical names in registration order."""
        self._ready()
        return list(self._entries)

    def values(self) -> list[T]:
        """Registered objects in registration order."""
        self._ready()
        return [e.obj for e in self._entries.values()]

    def items(self) -> list[tuple[str, T]]:
        self._ready()
        return [(k, e.obj) for k, e in self._entries.items()]

    def entries(self) -> list[Entry[T]]:
        self._ready()
        return list(self._entries.values())

    def registered_now(self, name: str) -> Entry[T] | None:
        """The entry ``name`` (case-insensitive, aliases followed) holds now, without running
        deferred work (a registration checking what it would replace); None when unregistered."""
        key = self._lookup.get(str(name).lower())
        return None if key is None else self._entries[key]

    def remove(self, name: str) -> None:
        """Drop ``name``'s entry and its aliases (a test's temporary registration)."""
        key = self.key(name)
        for k in (key, *self._entries.pop(key).aliases):
            self._lookup.pop(k.lower(), None)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
