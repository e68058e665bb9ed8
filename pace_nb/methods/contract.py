"""The one Method contract: every runnable method — PACE, SPEAR, Local, the one-round controls,
the multi-round and the one-shot baselines — is a :class:`Method` subclass registered with
:func:`register` in its own module.

A method class carries its identity and its hyperparameters, in the style of scikit-learn
estimators (the constructor only stores a validated config; learned state never lives here):

* ``name`` (the one id; ``aliases`` resolve to it), ``label`` (display name as the papers print
  it), ``labels`` (``{context: label}`` where one paper prints another name), ``paper``,
  ``colour`` and ``marker`` (its look in every figure), ``paper_rows`` (``{table: row}``: it is
  that row of a paper table of :data:`~pace_nb.methods.registry.PAPER_TABLES`), ``comparison``
  (run it in SPEAR's comparison, after the paper's rows), ``evaluation`` (where its rows are scored, one of
  :data:`~pace_nb.core.schema.EVALUATIONS`: ``"receivers"``, each receiver's model on its own
  test nodes, or ``"complete_graph"``, the server's global model on the complete graph; set by
  every mechanism, required by :func:`register`, and the ``evaluation`` column of its rows),
  ``needs`` (shared inputs: ``("local",)`` = the matched Local models) and
  ``quick_params`` (hyperparameters that make it fast on a small graph: the conformance checks of
  :mod:`pace_nb.testing`, never results); ``shared_options`` (hyperparameters a run or grid sets
  from its own options, one value for the whole run: PACE's ``variants`` and ``ranks`` from
  ``--variants`` / ``--rank`` and a grid's ``pace_variants`` / ``ranks``), ``ranked`` (its rows'
  ``rank`` is a carrier rank, 0 = dense; else always 0) and ``partition`` (the partition scheme
  of its paper's protocol, the default where a command runs it alone: ``pace-nb flower``). ``labels``, ``paper_rows``, ``comparison``, ``colour``
  and ``marker`` are not inherited: a subclass that is another method declares its own.
* ``Config``: a frozen dataclass whose fields are declared with
  :func:`~pace_nb.core.validation.param` (the paper's default and the field's checks; a subclass
  Config inherits its base's fields with their checks), checked by :meth:`Method.validate` for
  checks spanning several fields and by :meth:`Method.check_federation` against a federation
  before any training. A field without a check (or a misspelt metadata key, or a leftover
  ``_parameter_constraints``) is a ``TypeError`` when the class is created; an unknown or
  mistyped name is a one-line :class:`~pace_nb.core.errors.ConfigError` with the valid names.
* :meth:`Method.run_method`: the protocol entry (:mod:`pace_nb.methods.protocol`) — result rows
  for every requested seed. Its phases, in the style of Flower strategies, belong to the
  method's mechanism: client message → server → receiver / evaluation
  (:class:`~pace_nb.methods.baselines.base.FederatedMethod` for R-round model exchange).
* :class:`OneRoundMethod`: a method of one upload per client — PACE, SPEAR and every
  :class:`~pace_nb.methods.oneshot.base.OneShotMethod` — declares its phases as hooks over bytes
  (:mod:`pace_nb.methods.phases`): :meth:`~OneRoundMethod.client_upload` (client k's upload from its
  own data, and what it keeps), :meth:`~OneRoundMethod.upload_spec` (what a server screens an upload
  against), :meth:`~OneRoundMethod.server_aggregate` (the ``(client, bytes)`` pairs, the failures and
  the public view only), then its evaluation: ``"receivers"`` — per-receiver return bytes,
  :meth:`~OneRoundMethod.receiver_logits` and :meth:`~OneRoundMethod.receiver_fields` — or
  ``"complete_graph"`` — :meth:`~OneRoundMethod.graph_rows`, the server's state on the complete graph.
  Its in-process ``run`` drives the same hooks, and the one Flower adapter
  (:mod:`pace_nb.flower.adapters`) drives them over the network.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, overload
from collections.abc import Callable, Sequence

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import EVALUATIONS
from pace_nb.core.validation import build_config, check_declaration
from pace_nb.methods.phases import Failure, PublicView, Receipt, Round, ServerResult, Upload, UploadSpec
from pace_nb.methods.registry import SHARED_OPTIONS, check_method_params, register_method


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
    paper_rows: ClassVar[dict[str, int]] = {}
    comparison: ClassVar[bool] = False
    #: Where the rows are scored (:data:`~pace_nb.core.schema.EVALUATIONS`); every mechanism sets it.
    evaluation: ClassVar[str] = ""
    quick_params: ClassVar[dict[str, Any]] = {}
    colour: ClassVar[str] = ""
    marker: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ("local",)
    #: Hyperparameters a run or a grid sets from its own options (not per method: ``--param``
    #: and ``method_params`` refuse them), e.g. PACE's ``("variants", "ranks")``.
    shared_options: ClassVar[tuple[str, ...]] = ()
    #: Its rows' ``rank`` is a carrier rank (0 = dense), not the "not applicable" 0.
    ranked: ClassVar[bool] = False
    #: The partition scheme of its paper's protocol (a command's default when it runs alone).
    partition: ClassVar[str] = "louvain"

    @dataclass(frozen=True)
    class Config:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_declaration(cls.Config, f"{cls.__qualname__}.Config", also=cls)

    def __init__(self, **hyper: Any):
        self.cfg = build_config(self.name, self.Config, hyper)
        self.validate()

    def validate(self) -> None:
        """Checks spanning several fields (each field's own are declared on it); raise
        ``ConfigError`` naming the bad one."""

    def check_federation(self, fg, train_config) -> None:
        """Checks of this configuration against the federation ``fg`` and the Local training
        config, run by the protocol before any training (e.g. PACE's rank against the layer
        widths); raise ``ConfigError``."""

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

    def budget(self) -> str:
        """One line on what one run of this configuration costs, in the method's own terms
        (for a published baseline: the budget its paper or released code runs); ``""`` when
        the method states none. Shown beside the measured seconds in REPRODUCTION.md."""
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cfg})"


class OneRoundMethod(Method):
    """A method of one round: each client uploads bytes once, the server answers from those bytes
    alone. The hooks below are its phases, the same in process (its ``run``) and on Flower (the one
    adapter, :mod:`pace_nb.flower.adapters`); a round runs ONE configuration of the method."""

    #: List-valued hyperparameters of which a round takes exactly one value (PACE's ``variants`` and
    #: ``ranks``; the in-process ``run`` loops over them, a Flower run is one of them).
    one_per_round: ClassVar[tuple[str, ...]] = ()

    def check_round(self) -> None:
        """This configuration is one round: every :attr:`one_per_round` option holds one value."""
        for name in self.one_per_round:
            value = getattr(self.cfg, name)
            if isinstance(value, (list, tuple)) and len(value) != 1:
                raise ConfigError(f"{self.name}: one round runs one configuration: parameter {name!r} must hold "
                                  f"exactly one value, got {list(value)}")

    def client_upload(self, rnd: Round, client: Any, local: Any = None) -> Upload:
        """Client phase: client ``client.index``'s upload from its own subgraph ``client`` (and its
        matched Local model ``local`` when ``"local" in requires()``), and what it keeps."""
        raise NotImplementedError

    def upload_spec(self, config: Any, view: PublicView | None, client: int) -> UploadSpec:
        """What a real client ``client``'s upload is, from the public ``view`` (``None``: the server
        was not told the federation's facts) and the round's training ``config``."""
        raise NotImplementedError

    def server_aggregate(self, rnd: Round, uploads: Sequence[tuple[int, bytes]],
                         failures: Sequence[Failure] = ()) -> ServerResult:
        """Server phase on the ``(client, bytes)`` pairs, the ``failures`` and ``rnd.view`` only."""
        raise NotImplementedError

    def receiver_logits(self, rnd: Round, client: Any, kept: bytes | None, returned: bytes) -> Receipt:
        """``"receivers"`` evaluation: a receiver's Local and External logits from its kept and returned bytes."""
        raise NotImplementedError(f"{self.name} is evaluated on the complete graph: its clients receive nothing")

    def receiver_fields(self, rnd: Round) -> dict[str, Any]:
        """``"receivers"`` evaluation: the rows' ``variant``, ``rank``, ``dense_bytes`` and ``params``."""
        raise NotImplementedError

    def graph_rows(self, rnd: Round, state: Any, graph: Any, up: Sequence[int], client_seconds: float,
                   server_seconds: float) -> list[dict[str, Any]]:
        """``"complete_graph"`` evaluation: the rows of the server's ``state`` on the complete graph
        ``graph`` (``up``: bytes uploaded per participant)."""
        raise NotImplementedError(f"{self.name} is evaluated at its receivers")


def _register(cls: type[Method], override: bool) -> type[Method]:
    if not (isinstance(cls, type) and issubclass(cls, Method)) or not cls.name:
        raise TypeError(f"register: {cls!r} must be a Method subclass with a name")
    if cls.evaluation not in EVALUATIONS:
        raise TypeError(f"register: {cls.__name__}.evaluation must be one of {', '.join(EVALUATIONS)} "
                        f"(where its rows are scored), got {cls.evaluation!r}")
    fields = {f.name for f in dataclasses.fields(cls.Config)} & set(SHARED_OPTIONS)
    if not set(cls.shared_options) <= fields:
        raise TypeError(f"register: {cls.__name__}.shared_options {sorted(set(cls.shared_options) - fields)}: each must "
                        f"be a field of its Config and one of the run-wide options {', '.join(SHARED_OPTIONS)}")
    own = vars(cls)
    if "groups" in own:
        raise ConfigError(f"method {cls.name!r}: `groups` is split in two: `paper_rows = {{table: row}}` (it is a row "
                          f"of a paper's table) and `comparison = True` (run it in SPEAR's comparison)")
    register_method(cls.name, cls, aliases=cls.aliases, needs=cls.requires(), override=override,
                    description=cls.description or f"{cls.label}: {cls.paper}", label=cls.label,
                    labels=dict(own.get("labels", {})), paper_rows=dict(own.get("paper_rows", {})),
                    comparison=bool(own.get("comparison", False)), evaluation=cls.evaluation,
                    colour=own.get("colour", ""), marker=own.get("marker", ""), paper=cls.paper,
                    shared_options=tuple(cls.shared_options), ranked=bool(cls.ranked), partition=cls.partition)
    return cls


@overload
def register(cls: type[Method], *, override: bool = False) -> type[Method]: ...
@overload
def register(cls: None = None, *, override: bool = False) -> Callable[[type[Method]], type[Method]]: ...


def register(cls=None, *, override=False):
    """Class decorator: register a :class:`Method` subclass under ``cls.name`` (and its aliases)
    in :data:`~pace_nb.methods.registry.METHODS`, with its identity as registry metadata.

    ``@register`` or ``@register(override=True)``: another class under an id already registered
    (e.g. replacing ``pace``) must say so, else it is a one-line ``ConfigError``."""
    if cls is None:
        return lambda c: _register(c, override)
    return _register(cls, override)


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
