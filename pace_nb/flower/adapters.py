"""The one Flower adapter: any registered :class:`~pace_nb.methods.contract.OneRoundMethod`'s
round hooks as the Flower apps call them (no method is named here).

Every method runs the same round (:func:`pace_nb.flower.server.run_round`): each client runs the
method's **client phase** (:meth:`~pace_nb.methods.contract.OneRoundMethod.client_upload`, on its
own partition, with its own Local model when the method needs one) and uploads bytes; the server
screens them against the method's :class:`~pace_nb.methods.phases.UploadSpec`
(:mod:`pace_nb.flower.screening`), runs its **server phase** on the admitted ``(client, bytes)``
pairs, the failures and the public view, then its **evaluation**, building the rows with the
in-process row builders:

* ``evaluation = "receivers"`` (PACE): the server phase returns one message per receiver; each
  receiver builds its Local and External logits (:meth:`~pace_nb.methods.contract.OneRoundMethod.receiver_logits`),
  blends them (CNLL) and reports confusion counts, which :func:`receiver_rows` hands to
  :func:`~pace_nb.methods.evaluation.evaluate_method`;
* ``evaluation = "complete_graph"`` (SPEAR and every :class:`~pace_nb.methods.oneshot.base.OneShotMethod`):
  the papers' protocol — the server's state on the complete graph, which only the evaluator's file
  (:func:`~pace_nb.flower.partitions.export_evaluation`) holds
  (:meth:`~pace_nb.methods.contract.OneRoundMethod.graph_rows`).

:func:`flower_methods` are the registered methods that implement the round hooks; anything else
(multi-round training, Local) is a one-line error. A round runs one configuration of the method
(:meth:`~pace_nb.methods.contract.OneRoundMethod.check_round`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from pace_nb.core.errors import ConfigError
from pace_nb.flower import screening, wire
from pace_nb.methods.calibration import calibrate
from pace_nb.methods.contract import OneRoundMethod
from pace_nb.methods.evaluation import evaluate_method
from pace_nb.methods.phases import Failure, PublicView, Round
from pace_nb.methods.registry import check_method_params, registered
from pace_nb.nn.gcn import init_params, stack_params
from pace_nb.nn.training import train_models

NAN = float("nan")


@dataclass
class ServerPhase:
    """What the server phase produced: per-receiver return bytes (receivers evaluation, aligned with
    the admitted uploads) or the method's state for its complete-graph evaluation, and its wall time."""

    returns: list[bytes] | None
    state: Any
    seconds: float
    round: Round | None = None


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


def public_view(num_classes: int, num_features: int, num_clients: int,
                manifest: screening.FederationManifest | None = None) -> PublicView:
    """The federation as a party without data sees it (what the method's hooks may read); with the
    server's ``manifest``, its view (each client's node and test-node counts too)."""
    if manifest is None:
        return PublicView(int(num_features), int(num_classes), int(num_clients))
    return manifest.view


class Adapter:
    """Any :class:`~pace_nb.methods.contract.OneRoundMethod` on Flower. Client side: :meth:`upload`
    (and :meth:`receive` for receivers evaluation); server side: :meth:`screen`, :meth:`consensus`,
    :meth:`server`, :meth:`rows`."""

    def __init__(self, settings, cls: type[OneRoundMethod]):
        self.settings = settings
        self.name = cls.name  # the registry's id of the method (its class ``cls``)
        self.evaluation = cls.evaluation
        self.method = cls(**check_method_params(cls.name, settings.method_params))
        self.method.check_round()
        self.spec: Any = None  # the upload spec of the last screened upload

    @property
    def consensus_what(self) -> str:
        """What :meth:`consensus` compares (named in an exclusion's reason)."""
        return self.spec.compared if self.spec is not None else "uploaded tensors"

    def check_federation(self, fg) -> None:
        """The method's checks against the federation, before any client trains
        (:meth:`~pace_nb.methods.contract.Method.check_federation`)."""
        self.method.check_federation(fg, self.settings.train_config)

    def _round(self, view: PublicView) -> Round:
        s = self.settings
        return Round(view, s.seed, s.train_config, s.device)

    # -- client side
    def upload(self, client, meta) -> tuple[bytes, bytes | None, dict[str, Any]]:
        """Client phase → (upload bytes, bytes the node keeps for :meth:`receive`, report fields)."""
        report: dict[str, Any] = {}
        local = None
        t0 = time.perf_counter()
        if "local" in self.method.requires():
            local = local_model(client, meta, self.settings)[0]
            report["train_seconds"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        rnd = self._round(public_view(meta["num_classes"], meta["num_features"], meta["num_clients"]))
        up = self.method.client_upload(rnd, client, local)
        report["upload_seconds"] = time.perf_counter() - t1
        return up.data, up.kept, report

    def receive(self, client, meta, kept: bytes | None, data: bytes) -> dict[str, Any]:
        """Receivers evaluation: the returned bytes → this receiver's report (α, confusion counts)."""
        if self.evaluation != "receivers":
            raise ConfigError(f"{self.name} evaluates on the complete graph; its clients receive nothing")
        c = int(meta["num_classes"])
        t0 = time.perf_counter()
        got = self.method.receiver_logits(self._round(public_view(c, meta["num_features"], meta["num_clients"])),
                                          client, kept, data)
        alpha, z = calibrate(got.local, got.external, client.y, client.val_mask, got.alpha)
        report = confusions(client, {"final": z, "local": got.local, "external": got.external}, c)
        report.update(alpha=float(alpha), receive_seconds=time.perf_counter() - t0)
        return report

    # -- server side
    def screen(self, data: bytes, num_classes: int, view: screening.FederationManifest | None = None,
               partition: int = -1) -> Any:
        """Parse and check one upload of client ``partition`` (raises :class:`screening.Invalid`)
        against the method's upload spec from what the server knows (``view``, when it holds the
        federation's public facts) → its parsed form."""
        pv = public_view(num_classes, view.num_features, 0, view) if view is not None else None
        self.spec = self.method.upload_spec(self.settings.train_config, pv, partition)
        return screening.upload(data, self.spec, num_classes, self.name)

    def consensus(self, parsed: Any) -> Any:
        """What every honest upload shares (compared with the majority), or None (nothing to compare)."""
        return screening.agreement(parsed, self.spec) if self.spec is not None else None

    def server(self, payloads: list[bytes], num_classes: int, fed: dict, *, partitions: Sequence[int] = (),
               failures: Sequence[Failure] = (), view: screening.FederationManifest | None = None) -> ServerPhase:
        """The server phase on the admitted uploads (in partition order, from clients ``partitions``;
        ``failures``: the clients without an admitted upload; ``fed``: the federation's public facts)."""
        t0 = time.perf_counter()
        rnd = self._round(public_view(num_classes, fed["num_features"], fed["num_clients"], view))
        out = self.method.server_aggregate(rnd, list(zip(partitions, payloads, strict=True)), failures)
        returns = [out.returns[p] for p in partitions] if out.returns is not None else None
        return ServerPhase(returns, out.state, time.perf_counter() - t0, rnd)

    def rows(self, phase: ServerPhase, *, up: list[int], down: list[int], reports: list[dict], partitions: list[int],
             num_classes: int, fed: dict, seconds: float, evaluation) -> list[dict]:
        rnd = phase.round
        assert rnd is not None
        if self.evaluation == "receivers":
            return receiver_rows(reports, partitions, num_classes, fed, seed=self.settings.seed, method=self.name,
                                 bytes_up=up, bytes_down=down, seconds=seconds, **self.method.receiver_fields(rnd))
        if rnd.view.num_features != evaluation.num_features:
            raise ConfigError(f"the uploads are of {rnd.view.num_features} features; the evaluation graph has "
                              f"{evaluation.num_features}")
        client_seconds = sum(float(r.get("upload_seconds", 0.0)) for r in reports)  # the client phase, as in-process
        return self.method.graph_rows(rnd, phase.state, evaluation, up, client_seconds, phase.seconds)


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


def flower_methods() -> tuple[str, ...]:
    """Every registered method Flower can run: those implementing the round hooks
    (:class:`~pace_nb.methods.contract.OneRoundMethod`)."""
    return tuple(e.name for e in registered().entries() if runs_on_flower(e.obj))


def runs_on_flower(cls: Any) -> bool:
    """``cls`` implements the round hooks (a :class:`~pace_nb.methods.contract.OneRoundMethod`)."""
    return isinstance(cls, type) and issubclass(cls, OneRoundMethod)


def resolve_method(name: str) -> str:
    """The registry id of ``name`` (the registry's one-line error when unknown); a method that
    cannot run on Flower (multi-round training, Local) is a :class:`ConfigError` saying why."""

    entry = registered().get(name)
    if runs_on_flower(entry.obj):
        return entry.name
    groups = entry.meta.get("paper_rows") or {}
    why = ("a multi-round federated method (it trains over rounds of server aggregation)"
           if "multiround" in groups or "pace_control" in groups or hasattr(entry.obj, "rounds") or
           hasattr(entry.obj, "aggregate") else "not a one-shot federated method")
    raise ConfigError(f"method {entry.name!r} cannot run on Flower: it is {why}; Flower runs the one-shot "
                      f"methods: {', '.join(flower_methods())}")


def make_adapter(settings) -> Adapter:
    """The adapter of ``settings.method`` (checked by :func:`resolve_method`)."""
    return Adapter(settings, registered().get(resolve_method(settings.method)).obj)


def check_settings(settings) -> None:
    """The method's hyperparameters among the Flower ``settings`` are valid and one configuration."""
    make_adapter(settings)  # builds the method from them (a ConfigError) and checks it is one round

