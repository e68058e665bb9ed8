"""Thin adapters: a registered one-shot method's phases as the Flower apps call them.

Every method runs the same round (:func:`pace_nb.flower.server.run_round`): each client runs
the method's **client phase** on its own partition and uploads bytes; the server screens them
(:mod:`pace_nb.flower.screening`), runs the method's **server phase** on the admitted bytes and
then its **evaluation**, building the rows with the in-process row builder:

* ``evaluation = "receivers"`` (PACE): the server phase returns one message per receiver; each
  receiver evaluates on its own nodes (:meth:`Adapter.receive`) and reports confusion counts,
  which :func:`receiver_rows` hands to :func:`~pace_nb.methods.evaluation.evaluate_method`;
* ``evaluation = "complete_graph"`` (SPEAR and every :class:`~pace_nb.methods.oneshot.base.OneShotMethod`):
  the papers' protocol — the server's global model on the complete graph, which only the
  evaluator's file (:func:`~pace_nb.flower.partitions.export_evaluation`) holds; the rows are
  :func:`~pace_nb.methods.spear.analysis.spear_row` / :func:`~pace_nb.methods.oneshot.base.oneshot_row`.

:func:`make_adapter` resolves a method name through the registry and picks the adapter of its
class (:data:`ADAPTERS`; no method id is named here): PACE's and SPEAR's classes (and their
subclasses) have their own adapter; any registered ``OneShotMethod`` subclass (FedCVAE, DENSE, FedSD2C, GHOST, OASIS, and
any method registered later) runs through :class:`OneShotAdapter`; anything else (multi-round
training, Local) is a one-line error.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any, ClassVar
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from pace_nb.core.config import resolve_device
from pace_nb.core.errors import ConfigError
from pace_nb.flower import screening, wire
from pace_nb.methods.calibration import calibrate
from pace_nb.methods.evaluation import evaluate_method
from pace_nb.methods.oneshot.base import OneShotContext, OneShotMethod, client_phase, oneshot_row, server_phase
from pace_nb.methods.pace import lowrank
from pace_nb.methods.phases import Failure, PublicView
from pace_nb.methods.pace import protocol as pace
from pace_nb.methods.pace.protocol import Pace
from pace_nb.methods.registry import check_method_params, registered
from pace_nb.methods.spear import core as spear
from pace_nb.methods.spear.method import Spear
from pace_nb.methods.spear.analysis import spear_row
from pace_nb.nn.gcn import init_params, stack_params
from pace_nb.nn.training import client_logits, train_models

NAN = float("nan")


@dataclass
class ServerPhase:
    """What the server phase produced: per-receiver return bytes (receivers evaluation) or the
    method's state for its complete-graph evaluation, and its wall time."""

    returns: list[bytes] | None
    state: Any
    seconds: float


def local_model(client, meta, settings) -> tuple[dict, dict]:
    """(W_L, W0) of this client for the run seed — :func:`~pace_nb.nn.training.train_local`
    restricted to one client, padded like the K-client batch (``meta["pad_to"]``) so that W_L is
    the same bit for bit."""
    tc = settings.train_config
    w0 = init_params(int(meta["num_features"]), int(meta["num_classes"]), tc.hidden, settings.seed)
    params, _ = train_models([client], stack_params([w0]), [tc.model_seed(settings.seed, client.index)], [0], tc,
                             device=settings.device, progress=False, pad_to=meta.get("pad_to"))
    return {n: v[0] for n, v in params.items()}, w0


def confusions(client, finals: dict[str, torch.Tensor], num_classes: int) -> dict[str, Any]:
    """A receiver's report: its test-node count and the test confusion counts of each prediction."""
    mask = client.test_mask
    y = client.y[mask]
    out: dict[str, Any] = {"partition_id": client.index, "n_test": int(mask.sum())}
    for key, z in finals.items():
        out[f"confusion_{key}"] = wire.confusion(y, z[mask].argmax(-1), num_classes)
    return out


def public_view(num_classes: int, num_features: int, num_clients: int) -> PublicView:
    """The federation as a party without data sees it (what the method's hooks may read)."""
    return PublicView(int(num_features), int(num_classes), int(num_clients))


class Adapter:
    """One method on Flower. Client side: :meth:`upload` (and :meth:`receive` for receivers
    evaluation); server side: :meth:`screen`, :meth:`consensus`, :meth:`server`, :meth:`rows`."""

    evaluation: ClassVar[str] = "complete_graph"
    #: What :meth:`consensus` compares (named in an exclusion's reason).
    consensus_what: ClassVar[str] = "uploaded tensors"

    def __init__(self, settings, cls):
        self.settings = settings
        self.name = cls.name  # the registry's id of the method (its class ``cls``)

    @classmethod
    def check_settings(cls, settings) -> None:
        """The method's hyperparameters among the Flower ``settings`` are valid (a ``ConfigError``)."""
        check_method_params(settings.method, settings.method_params)

    @classmethod
    def reference_params(cls, settings) -> dict[str, Any]:
        """The in-process hyperparameters of the same run (``run_protocol``'s ``method_params``)."""
        return settings.method_params

    def check_federation(self, fg) -> None:
        """The method's checks against the federation, before any client trains
        (:meth:`~pace_nb.methods.contract.Method.check_federation`)."""

    # -- client side
    def upload(self, client, meta) -> tuple[bytes, bytes | None, dict[str, Any]]:
        """Client phase → (upload bytes, bytes the node keeps for :meth:`receive`, report fields)."""
        raise NotImplementedError

    def receive(self, client, meta, kept: bytes | None, data: bytes) -> dict[str, Any]:
        """Receivers evaluation: the returned bytes → this receiver's report."""
        raise ConfigError(f"{self.name} evaluates on the complete graph; its clients receive nothing")

    # -- server side
    def screen(self, data: bytes, num_classes: int, view: screening.PublicView | None = None,
               partition: int = -1) -> Any:
        """Parse and check one upload of client ``partition`` (raises :class:`screening.Invalid`)
        against what the server knows (``view``, when it holds the federation's public facts) →
        its parsed form."""
        raise NotImplementedError

    def consensus(self, parsed: Any) -> Any:
        """What every honest upload shares (compared with the majority), or None (nothing to compare)."""
        return None

    def server(self, payloads: list[bytes], parsed: list[Any], num_classes: int, fed: dict, *,
               partitions: Sequence[int] = (), failures: Sequence[Failure] = ()) -> ServerPhase:
        """The server phase on the admitted uploads (in partition order, from clients ``partitions``;
        ``failures``: the clients without an admitted upload; ``fed``: the federation's public facts)."""
        raise NotImplementedError

    def rows(self, phase: ServerPhase, *, up: list[int], down: list[int], reports: list[dict], partitions: list[int],
             num_classes: int, fed: dict, seconds: float, evaluation) -> list[dict]:
        raise NotImplementedError


# ----------------------------------------------------------------------------- PACE
class PaceAdapter(Adapter):
    """PACE (Fig. 2): Local → rank-r upload; RegMean server; receiver-local CNLL."""

    evaluation = "receivers"

    @classmethod
    def check_settings(cls, settings) -> None:
        _ = settings.pace_config  # validates the variant
        _flat_only(settings, "rank, variant")

    @classmethod
    def reference_params(cls, settings) -> dict[str, Any]:
        return {"variants": (settings.variant,), "ranks": (settings.rank,)}

    def check_federation(self, fg):
        from pace_nb.methods.pace.protocol import Pace

        Pace(ranks=(self.settings.rank,)).check_federation(fg, self.settings.train_config)

    def upload(self, client, meta):

        t0 = time.perf_counter()
        w_l, w0 = local_model(client, meta, self.settings)
        t_train = time.perf_counter() - t0
        data = pace.upload(w_l, w0, client, self.settings.pace_config)
        return data, lowrank.serialize(lowrank.dense_carriers(w_l)), {
            "train_seconds": t_train, "upload_seconds": time.perf_counter() - t0 - t_train}

    def receive(self, client, meta, kept, data):

        s = self.settings
        if kept is None:
            raise ConfigError("pace receive before upload: this node holds no Local model")
        w_l = lowrank.reconstruct(lowrank.deserialize(kept))
        w0 = init_params(int(meta["num_features"]), int(meta["num_classes"]), s.train_config.hidden, s.seed)
        t0 = time.perf_counter()
        cfg = s.pace_config
        w_e = pace.receive(w_l, w0, data, cfg)
        z_l = client_logits(w_l, client, device=s.device)
        z_e = client_logits(w_e, client, device=s.device)
        alpha, z = calibrate(z_l, z_e, client.y, client.val_mask, cfg.alpha if isinstance(cfg.alpha, str) else float(cfg.alpha))
        report = confusions(client, {"final": z, "local": z_l, "external": z_e}, int(meta["num_classes"]))
        report.update(alpha=float(alpha), receive_seconds=time.perf_counter() - t0)
        return report

    def screen(self, data, num_classes, view=None, partition=-1):
        s = self.settings
        layout = (pace.upload_layout(view.num_features, num_classes, s.hidden, s.pace_config)
                  if view is not None else None)
        bounds = pace.upload_bounds(layout, s.epochs, s.lr) if layout is not None else None
        return screening.pace_header(data, layout, bounds)

    def consensus(self, parsed):
        return parsed

    def server(self, payloads, parsed, num_classes, fed, *, partitions=(), failures=()):

        t0 = time.perf_counter()
        returns = pace.server(payloads, self.settings.pace_config)
        # the dense model's size from the upload header: 4 bytes per entry of every ΔW carrier
        dense = 4 * sum(int(torch.Size(shape).numel()) for n, _, shape, _ in parsed[0] if n.startswith(pace.DELTA))
        return ServerPhase(returns, dense, time.perf_counter() - t0)

    def rows(self, phase, *, up, down, reports, partitions, num_classes, fed, seconds, evaluation):
        s = self.settings
        cfg = s.pace_config
        return receiver_rows(reports, partitions, num_classes, fed, seed=s.seed, method=self.name, variant=s.variant,
                             rank=cfg.rank, bytes_up=up, bytes_down=down, dense_bytes=phase.state, seconds=seconds,
                             params={"pace": asdict(cfg), "train": asdict(s.train_config)})


def receiver_rows(reports: list[dict], partitions: list[int], num_classes: int, fed: dict, **kw) -> list[dict]:
    """Receiver and pooled rows from the receivers' test confusion counts, built by the in-process
    :func:`~pace_nb.methods.evaluation.evaluate_method`.

    A confusion matrix is the same information as the receiver's (label, prediction) pairs in
    label order (:func:`wire.pairs`); every metric is order-free. The builder gets them as one-hot
    logits: a first call with the final predictions as the native ones (``acc``, F1, ``acc_local``,
    bytes and their ratios, ``n_test``), a second with the External predictions and the reported
    α as a fixed blend of identical logits (``alpha`` per receiver and pooled, ``acc_external``).
    """

    def onehot(pred):
        return F.one_hot(torch.from_numpy(pred).long(), num_classes).float()

    clients: list[SimpleNamespace] = []
    pred: dict[str, list[torch.Tensor]] = {"final": [], "local": [], "external": []}
    for rep in reports:
        y, _ = wire.pairs(rep["confusion_final"], num_classes)
        for key in pred:
            pred[key].append(onehot(wire.pairs(rep[f"confusion_{key}"], num_classes)[1]))
        n = len(y)
        clients.append(SimpleNamespace(y=torch.from_numpy(y).long(), test_mask=torch.ones(n, dtype=torch.bool),
                                       val_mask=torch.zeros(n, dtype=torch.bool)))
    view = SimpleNamespace(dataset=fed.get("dataset"), config={"scheme": fed.get("scheme"), "seed": fed.get("seed"), "beta": fed.get("beta")}, num_clients=len(reports),
                           num_classes=num_classes, clients=clients)
    rows = evaluate_method(view, pred["local"], pred["final"], None, **kw)
    blended = evaluate_method(view, pred["external"], pred["external"], [float(r["alpha"]) for r in reports], **kw)
    for row, other, pid in zip(rows, blended, list(partitions) + [-1], strict=True):
        row.update(receiver=int(pid), alpha=other["alpha"], acc_external=other["acc_local"],
                   num_clients=int(fed.get("num_clients", len(reports))))
    return rows


# ----------------------------------------------------------------------------- SPEAR
class SpearAdapter(Adapter):
    """SPEAR: PPR prototypes and counts up; shrinkage aggregation; complete-graph evaluation."""

    consensus_what = "prototype widths"

    @classmethod
    def check_settings(cls, settings) -> None:
        settings.spear_config.for_variant(settings.spear_variant)
        _flat_only(settings, "spear_variant, T, a, gamma")

    @classmethod
    def reference_params(cls, settings) -> dict[str, Any]:
        return {"variants": (settings.spear_variant,), "T": settings.T, "a": settings.a, "gamma": settings.gamma}

    def _config(self):
        return self.settings.spear_config.for_variant(self.settings.spear_variant)

    def upload(self, client, meta):

        t0 = time.perf_counter()
        if client.num_nodes == 0 or not bool(client.train_mask.any()):
            data = b""  # holds no class: sends nothing (as spear.core.upload_bytes counts it)
        else:
            cfg, _ = self._config()
            z = spear.ppr_propagate(client.x, client.edge_index, cfg.T, cfg.a)
            data = spear.serialize_upload(*spear.class_prototypes(z, client.y, client.train_mask, int(meta["num_classes"])))
        return data, None, {"upload_seconds": time.perf_counter() - t0}

    def screen(self, data, num_classes, view=None, partition=-1):
        if view is None:
            return screening.spear_tensors(data, num_classes)
        return screening.spear_tensors(data, num_classes, view.num_features, view.num_nodes[partition])

    def consensus(self, parsed):
        p, n = parsed
        return p.shape[1] if bool((n > 0).any()) else None  # an empty upload has no width to agree on

    def server(self, payloads, parsed, num_classes, fed, *, partitions=(), failures=()):
        t0 = time.perf_counter()
        widths = {p.shape[1] for p, n in parsed if bool((n > 0).any())}
        if not widths:
            raise ConfigError("no admitted SPEAR client uploaded a prototype (every upload was empty)")
        f = widths.pop()
        P = torch.stack([p if p.shape[1] == f else torch.zeros(num_classes, f) for p, _ in parsed])
        N = torch.stack([n for _, n in parsed])
        return ServerPhase(None, (P, N), time.perf_counter() - t0)

    def rows(self, phase, *, up, down, reports, partitions, num_classes, fed, seconds, evaluation):

        v = self.settings.spear_variant
        r = spear.run_spear(evaluation, self.settings.spear_config, v, uploads=phase.state)
        return [spear_row(evaluation, v, r.acc, r.config, label=spear.VARIANT_LABELS[v], val_acc=100 * r.val_acc,
                          n_test=int(evaluation.global_mask("test").sum()), bytes_up=r.bytes_up)]


# ----------------------------------------------------------------------------- every OneShotMethod
class OneShotAdapter(Adapter):
    """Any registered :class:`~pace_nb.methods.oneshot.base.OneShotMethod`: its client phase on
    the node's partition (with the node's own Local model when the method uses it), its server
    phase on the bytes alone, SPEAR's complete-graph evaluation (:func:`oneshot_row`)."""

    def __init__(self, settings, cls):
        super().__init__(settings, cls)
        self.method = cls(**settings.method_params)
        self.declared = False  # whether the uploads were screened against the method's declared shapes

    def screen(self, data, num_classes, view=None, partition=-1):
        shapes = (self.method.upload_shapes(view.num_features, num_classes, self.settings.train_config.hidden)
                  if view is not None else None)
        self.declared = shapes is not None
        return screening.carriers_header(data, self.name, allow_empty=True, bound=self.method.max_upload_value,
                                         shapes=shapes)

    def consensus(self, parsed):
        """Without a declared layout (no public view, or a method declaring none): the tensor names
        and their numbers of dimensions (sizes may depend on a client's data), compared with the
        majority's. Uploads screened against the method's declared shapes share nothing more."""
        if self.declared or not parsed:
            return None
        return tuple((n, k, len(s)) for n, k, s, _ in parsed)

    def check_federation(self, fg):
        self.method.check_federation(fg, self.settings.train_config)

    def _context(self, view, local=None):

        s = self.settings
        return OneShotContext(view, s.seed, s.train_config, resolve_device(s.device), local)

    def upload(self, client, meta):

        report: dict[str, Any] = {}
        local = None
        t0 = time.perf_counter()
        if self.method.uses_local:
    
            local = [None] * int(meta["num_clients"])
            local[client.index] = local_model(client, meta, self.settings)[0]
            report["train_seconds"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        ctx = self._context(public_view(meta["num_classes"], meta["num_features"], meta["num_clients"]), local)
        data = client_phase(self.method, ctx, client.index, client)
        report["upload_seconds"] = time.perf_counter() - t1
        return data, None, report

    def server(self, payloads, parsed, num_classes, fed, *, partitions=(), failures=()):

        t0 = time.perf_counter()
        ctx = self._context(public_view(num_classes, fed["num_features"], fed["num_clients"]))
        theta, graph = server_phase(self.method, ctx, list(zip(partitions, payloads, strict=True)), failures)
        return ServerPhase(None, (ctx, theta, graph), time.perf_counter() - t0)

    def rows(self, phase, *, up, down, reports, partitions, num_classes, fed, seconds, evaluation):

        ctx, theta, graph = phase.state
        if ctx.num_features != evaluation.num_features:
            raise ConfigError(f"the uploads are of {ctx.num_features} features; the evaluation graph has "
                              f"{evaluation.num_features}")
        client_seconds = sum(float(r.get("upload_seconds", 0.0)) for r in reports)  # the client phase, as in-process
        return [oneshot_row(evaluation, self.method, ctx, theta, graph, up, client_seconds, phase.seconds)]


def method_params(text: Any) -> dict[str, Any]:
    """The ``params`` setting (JSON object text, or a mapping) → a dict."""
    if isinstance(text, dict):
        return dict(text)
    try:
        out = json.loads(text) if text else {}
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Flower setting params must be a JSON object of method hyperparameters: {exc}") from None
    if not isinstance(out, dict):
        raise ConfigError(f"Flower setting params must be a JSON object of method hyperparameters, got {text!r}")
    return out


def _flat_only(settings, names: str) -> None:
    if settings.method_params:
        raise ConfigError(f"{settings.method}: set its hyperparameters as Flower settings ({names}), not in params")


#: The adapter of each kind of method, by its class (the first base a method's class subclasses).
ADAPTERS: tuple[tuple[type, type[Adapter]], ...] = ((Pace, PaceAdapter), (Spear, SpearAdapter),
                                                    (OneShotMethod, OneShotAdapter))


def adapter_class(method: Any) -> type[Adapter] | None:
    """The adapter of a method class (:data:`ADAPTERS`), None when Flower cannot run it."""
    if isinstance(method, type):
        for base, adapter in ADAPTERS:
            if issubclass(method, base):
                return adapter
    return None


def flower_methods() -> tuple[str, ...]:
    """Every registered method Flower can run (PACE, SPEAR, every one-shot method)."""

    return tuple(e.name for e in registered().entries() if adapter_class(e.obj) is not None)


def resolve_method(name: str) -> str:
    """The registry id of ``name`` (the registry's one-line error when unknown); a method that
    cannot run on Flower (multi-round training, Local) is a :class:`ConfigError` saying why."""

    entry = registered().get(name)
    if adapter_class(entry.obj) is not None:
        return entry.name
    groups = entry.meta.get("paper_rows") or {}
    why = ("a multi-round federated method (it trains over rounds of server aggregation)"
           if "multiround" in groups or "pace_control" in groups or hasattr(entry.obj, "rounds") or
           hasattr(entry.obj, "aggregate") else "not a one-shot federated method")
    raise ConfigError(f"method {entry.name!r} cannot run on Flower: it is {why}; Flower runs the one-shot "
                      f"methods: {', '.join(flower_methods())}")


def make_adapter(settings) -> Adapter:
    """The adapter of ``settings.method`` (checked by :func:`resolve_method`)."""

    cls = registered().get(resolve_method(settings.method)).obj
    adapter = adapter_class(cls)
    assert adapter is not None  # resolve_method refuses a method without one
    return adapter(settings, cls)
