"""The ClientApp: one data holder, its own partition only (PACE Fig. 2 steps 1 and 3; SPEAR; the
one-shot baselines' clients).

Each SuperNode knows where its data is through its ``node_config``: ``partition-id`` (set by
Flower's simulation engine, or ``--node-config`` in a deployment) and ``partition-dir`` (a
folder written by :func:`pace_nb.flower.partitions.export_partitions`). It reads only
``client_<partition-id>.npz``.

Two message types, the same for every method (the method is named in the broadcast settings;
:func:`pace_nb.flower.adapters.make_adapter` gives its phases):

* ``train.upload``: the method's client phase (:meth:`~pace_nb.flower.adapters.Adapter.upload`)
  → the upload bytes, a report (partition id, C, compute seconds) and the federation's public
  facts. What the client keeps for the second message (PACE: its Local model W_L — trained with
  the batched trainer on this one client, W0 of the run seed, dropout seed ``model_seed(seed, k)``,
  the same W_L as in-process) stays in the node's ``Context.state``;
* ``evaluate.receive`` (methods evaluated at the receivers, PACE): the returned bytes → the
  receiver's report (α by CNLL on its own validation nodes, Eq. 10; test confusion counts).
"""
from __future__ import annotations

from typing import Any

from pace_nb.core.errors import ConfigError
from pace_nb.flower import wire
from pace_nb.flower.adapters import make_adapter
from pace_nb.flower.partitions import load_partition
from pace_nb.flower.settings import FlowerSettings

STATE = "kept"


def _partition(context, default_dir):
    cfg = dict(context.node_config)
    directory = cfg.get("partition-dir", default_dir)
    if directory is None or "partition-id" not in cfg:
        raise ConfigError("this SuperNode has no partition: set node_config partition-dir and partition-id")
    return load_partition(directory, int(cfg["partition-id"]))


def _settings(message) -> FlowerSettings:
    return FlowerSettings.from_mapping(dict(message.content[wire.CONFIG]))


def _reply(message, payload: bytes | None, report: dict[str, Any], meta: dict | None = None):
    """Reply: the report; with an upload also the payload and the federation's public facts."""
    from flwr.app import ConfigRecord, Message, MetricRecord, RecordDict

    content = RecordDict({wire.REPORT: MetricRecord(report)})
    if payload is not None and meta is not None:
        content[wire.PAYLOAD] = ConfigRecord({wire.BLOB: payload})
        cfg = meta.get("config", {})
        content[wire.CONFIG] = ConfigRecord({"dataset": str(meta["dataset"]), "scheme": str(cfg.get("scheme", "")),
                                             "seed": int(cfg.get("seed", -1)), "num_clients": int(meta["num_clients"]),
                                             "num_features": int(meta["num_features"]),
                                             "credential": bytes(meta.get("credential", b"")),
                                             **({} if cfg.get("beta") is None else {"beta": float(cfg["beta"])})})
    return Message(content, reply_to=message)


def upload(message, context, default_dir=None):
    """``train.upload``: the method's client phase on this node's partition."""
    from flwr.app import ConfigRecord

    client, meta = _partition(context, default_dir)
    s = _settings(message)
    data, kept, report = make_adapter(s).upload(client, meta)
    context.state[STATE] = ConfigRecord({"method": s.method, "seed": s.seed,
                                         **({wire.BLOB: kept} if kept is not None else {})})
    return _reply(message, data, {"partition_id": client.index, "num_classes": int(meta["num_classes"]), **report}, meta)


def receive(message, context, default_dir=None):
    """``evaluate.receive``: the method's receiver evaluation of the returned bytes."""
    client, meta = _partition(context, default_dir)
    s = _settings(message)
    if STATE not in context.state:
        raise ConfigError("receive before upload: this node uploaded nothing in this run")
    held = context.state[STATE]
    if str(held["method"]) != s.method or int(held["seed"]) != s.seed:
        raise ConfigError(f"this node uploaded for {held['method']} seed {held['seed']}, not {s.method} seed {s.seed}")
    kept = held.get(wire.BLOB)
    return _reply(message, None, make_adapter(s).receive(client, meta, kept, wire.blob(message.content[wire.PAYLOAD])))


def make_client_app(partition_dir=None, drop_partitions=()):
    """A ``ClientApp`` serving every method Flower runs; ``partition_dir`` is the default when the
    node_config names none. ``drop_partitions``: partition ids that drop out before uploading
    (they raise, as a crashed or disconnected client would): a simulation of stragglers and
    failures (``pace-nb flower simulate --drop``); the server runs on the others' uploads."""
    from flwr.clientapp import ClientApp

    app = ClientApp()
    drop = {int(k) for k in drop_partitions}

    def guarded(fn, first: bool):
        def handler(message, context):
            part = int(dict(context.node_config).get("partition-id", -1))
            if first and part in drop:
                raise ConnectionError(f"client {part} dropped out before upload")
            return fn(message, context, partition_dir)
        return handler

    app.train("upload")(guarded(upload, True))
    app.evaluate("receive")(guarded(receive, False))
    return app
