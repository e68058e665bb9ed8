"""The one Method contract: every runnable method — PACE, SPEAR, Local, the one-round controls,
the multi-round and the one-shot baselines — is a :class:`Method` subclass registered with
:func:`register` in its own module.

A method class carries its identity and its hyperparameters, in the style of scikit-learn
estimators (the constructor only stores a validated config; learned state never lives here):

* ``name`` (the one id; ``aliases`` resolve to it), ``label`` (display name as the papers print
  it), ``labels`` (``{context: label}`` where one paper prints another name), ``paper``,
  ``colour`` and ``marker`` (its look in every figure), ``groups`` (``{tag: row}`` of
  :data:`~pace_nb.methods.registry.GROUPS`), ``needs`` (shared inputs: ``("local",)`` = the
  matched Local models), ``evaluation`` (where its rows are scored, one of
  :data:`~pace_nb.core.schema.EVALUATIONS`: ``"receivers"``, each receiver's model on its own
  test nodes, or ``"complete_graph"``, the server's global model on the complete graph; set by
  every mechanism, required by :func:`register`, and the ``evaluation`` column of its rows).
  ``labels``, ``groups``, ``colour`` and ``marker`` are not inherited: a subclass that is
  another method declares its own.
* ``Config``: a frozen dataclass whose defaults are the paper's values, checked field by field
  by ``_parameter_constraints`` (:mod:`pace_nb.core.validation`, merged along the class
  hierarchy) and by :meth:`Method.validate` for checks spanning several fields. An unknown or
  mistyped name is a one-line :class:`~pace_nb.core.errors.ConfigError` with the valid names.
* :meth:`Method.run_method`: the protocol entry (:mod:`pace_nb.methods.protocol`) — result rows
  for every requested seed. Its phases, in the style of Flower strategies, belong to the
  method's mechanism: client message → server → receiver / evaluation
  (:class:`~pace_nb.methods.baselines.base.FederatedMethod` for R-round model exchange,
  :class:`~pace_nb.methods.oneshot.base.OneShotMethod` for one upload and a server-side model;
  PACE and SPEAR define their own), and the Flower adapters (:mod:`pace_nb.flower.adapters`)
  drive the same phases over the network.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import EVALUATIONS
from pace_nb.core.validation import build_config, merged_constraints
from pace_nb.methods.registry import check_method_params, register_method


class Method:
    """Base class of every method: identity, one strict ``Config``, the protocol entry."""

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    label: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    #: One-line description for ``pace-nb methods`` (default: ``"<label>: <paper>"``).
    description: ClassVar[str] = ""
    #: Not inherited (see the module docstring).
    labels: ClassVar[dict[str, str]] = {}
    groups: ClassVar[dict[str, int]] = {}
    colour: ClassVar[str] = ""
    marker: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ("local",)
    #: Where the rows are scored (:data:`~pace_nb.core.schema.EVALUATIONS`); every mechanism sets it.
    evaluation: ClassVar[str] = ""
    _parameter_constraints: ClassVar[dict] = {}

    @dataclass(frozen=True)
    class Config:
        pass

    def __init__(self, **hyper: Any):
        self.cfg = build_config(self.name, self.Config, hyper, merged_constraints(type(self)))
        self.validate()

    def validate(self) -> None:
        """Checks beyond :attr:`_parameter_constraints`; raise ``ConfigError`` naming the bad one."""

    def _require(self, name: str, ok: bool, what: str) -> None:
        if not ok:
            raise ConfigError(f"{self.name}: parameter {name!r} must be {what}, got {getattr(self.cfg, name)!r}")

    @classmethod
    def requires(cls) -> tuple[str, ...]:
        """The shared inputs the protocol must build for this method (``"local"``: Local models)."""
        return tuple(cls.needs)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Validate a mapping of hyperparameters (the :attr:`Config` fields and their constraints)."""
        cls(**params)

    def hyperparameters(self) -> dict[str, Any]:
        """The config as a plain dict (recorded in every row's ``params``)."""
        return dataclasses.asdict(self.cfg)

    @classmethod
    def run_method(cls, fg, local, *, seeds=None, device="auto", progress: bool = True, local_logits=None,
                   train_config=None, **params):
        """The protocol entry: check ``params`` (unknown names are a one-line error), build the
        method and run it (:meth:`run`)."""
        method = cls(**check_method_params(cls.name, params))
        return method.run(fg, local, seeds=seeds, device=device, progress=progress, local_logits=local_logits,
                          train_config=train_config)

    def run(self, fg, local, *, seeds=None, device="auto", progress: bool = True, local_logits=None,
            train_config=None):
        """Result rows of this configured method on ``fg`` (a DataFrame or a list of row dicts)."""
        raise NotImplementedError(f"{type(self).__name__} defines neither run nor run_method")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cfg})"


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: register a :class:`Method` subclass under ``cls.name`` (and its aliases)
    in :data:`~pace_nb.methods.registry.METHODS`, with its identity as registry metadata."""
    if not (isinstance(cls, type) and issubclass(cls, Method)) or not cls.name:
        raise TypeError(f"register: {cls!r} must be a Method subclass with a name")
    if cls.evaluation not in EVALUATIONS:
        raise TypeError(f"register: {cls.__name__}.evaluation must be one of {', '.join(EVALUATIONS)} "
                        f"(where its rows are scored), got {cls.evaluation!r}")
    own = vars(cls)
    register_method(cls.name, cls, aliases=cls.aliases, needs=cls.requires(),
                    description=cls.description or f"{cls.label}: {cls.paper}", label=cls.label,
                    labels=dict(own.get("labels", {})), groups=dict(own.get("groups", {})),
                    colour=own.get("colour", ""), marker=own.get("marker", ""), paper=cls.paper,
                    evaluation=cls.evaluation)
    return cls


def method_class(name: str, kind: type[Method] = Method) -> type:
    """The registered class of method ``name`` (aliases resolved; ``UnknownNameError`` listing the
    valid ones), required to be a ``kind`` subclass (e.g. ``FederatedMethod``)."""
    from pace_nb.methods.registry import registered

    cls = registered()[name]
    if not issubclass(cls, kind):
        raise ConfigError(f"{name!r} is not a {kind.__name__} (it is a {cls.__mro__[1].__name__})")
    return cls


def make(name: str, kind: type[Method] = Method, **hyperparameters: Any) -> Method:
    """A configured method: ``method_class(name, kind)(**hyperparameters)``."""
    return method_class(name, kind)(**hyperparameters)
