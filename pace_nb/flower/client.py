"""The ClientApp: one data holder, its own partition only (PACE Fig. 2 steps 1 and 3; SPEAR).

Each SuperNode knows where its data is through its ``node_config``: ``partition-id`` (set by
Flower's simulation engine, or ``--node-config`` in a deployment) and ``partition-dir`` (a
folder written by :func:`pace_nb.flower.partitions.export_partitions`). It reads only
``client_<partition-id>.npz``.

PACE. ``train.pace_upload``: train Local (the batched trainer with this one client, W0 of the
run seed, dropout seed ``model_seed(seed, k)`` — the same W_L as in-process), reply with the
bytes of :func:`~pace_nb.methods.pace.protocol.upload`; W_L stays in the node's ``Context.state``.
``evaluate.pace_receive``: ``W_E`` from the returned bytes (:func:`~pace_nb.methods.pace.protocol.receive`),
α by CNLL on the own validation nodes (Eq. 10), report test confusion counts.

SPEAR. ``train.spear_upload``: PPR prototypes and counts of the own training nodes
(:func:`~pace_nb.methods.spear.core.serialize_upload`); ``evaluate.spear_receive``: predict the
own test nodes with the global prototypes (cosine, own subgraph), report confusion counts.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from pace_nb.core.errors import ConfigError
from pace_nb.flower import wire
from pace_nb.flower.partitions import load_partition
from pace_nb.flower.settings import FlowerSettings
from pace_nb.methods.calibration import calibrate
from pace_nb.methods.pace import lowrank
from pace_nb.methods.pace import protocol as pace
from pace_nb.methods.spear import core as spear
from pace_nb.nn.gcn import init_params, stack_params
from pace_nb.nn.training import client_logits, train_models

STATE = "pace_local"


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
    if payload is not None:
        content[wire.PAYLOAD] = ConfigRecord({wire.BLOB: payload})
        cfg = meta.get("config", {})
        content[wire.CONFIG] = ConfigRecord({"dataset": str(meta["dataset"]), "scheme": str(cfg.get("scheme", "")),
                                             "seed": int(cfg.get("seed", -1)), "num_clients": int(meta["num_clients"])})
    return Message(content, reply_to=message)


def local_model(client, meta, settings: FlowerSettings) -> tuple[dict, dict]:
    """(W_L, W0) of this client for the run seed — :func:`train_local` restricted to one client,
    padded like the K-client batch (``meta["pad_to"]``) so that W_L is the same bit for bit."""
    tc = settings.train_config
    w0 = init_params(int(meta["num_features"]), int(meta["num_classes"]), tc.hidden, settings.seed)
    params, _ = train_models([client], stack_params([w0]), [tc.model_seed(settings.seed, client.index)], [0], tc,
                             device=settings.device, progress=False, _pad_to=meta.get("pad_to"))
    return {n: v[0] for n, v in params.items()}, w0


def pace_upload(message, context, default_dir=None):
    client, meta = _partition(context, default_dir)
    s = _settings(message)
    t0 = time.perf_counter()
    w_l, w0 = local_model(client, meta, s)
    t_train = time.perf_counter() - t0
    data = pace.upload(w_l, w0, client, s.pace_config)
    from flwr.app import ConfigRecord

    context.state[STATE] = ConfigRecord({wire.BLOB: lowrank.serialize(lowrank.dense_carriers(w_l)),
                                         "seed": s.seed})
    return _reply(message, data, {"partition_id": client.index, "num_classes": int(meta["num_classes"]),
                                  "train_seconds": t_train, "upload_seconds": time.perf_counter() - t0 - t_train}, meta)


def _confusions(client, finals: dict[str, torch.Tensor], num_classes: int) -> dict[str, Any]:
    mask = client.test_mask
    y = client.y[mask]
    out: dict[str, Any] = {"partition_id": client.index, "n_test": int(mask.sum())}
    for key, z in finals.items():
        out[f"confusion_{key}"] = wire.confusion(y, z[mask].argmax(-1), num_classes)
    return out


def pace_receive(message, context, default_dir=None):
    client, meta = _partition(context, default_dir)
    s = _settings(message)
    if STATE not in context.state:
        raise ConfigError("pace_receive before pace_upload: this node holds no Local model")
    held = context.state[STATE]
    if int(held["seed"]) != s.seed:
        raise ConfigError(f"this node's Local model is of seed {held['seed']}, not {s.seed}")
    w_l = lowrank.reconstruct(lowrank.deserialize(held[wire.BLOB]))
    tc = s.train_config
    w0 = init_params(int(meta["num_features"]), int(meta["num_classes"]), tc.hidden, s.seed)
    t0 = time.perf_counter()
    cfg = s.pace_config
    w_e = pace.receive(w_l, w0, wire.blob(message.content[wire.PAYLOAD]), cfg)
    z_l = client_logits(w_l, client, device=s.device)
    z_e = client_logits(w_e, client, device=s.device)
    alpha, z = calibrate(z_l, z_e, client.y, client.val_mask, cfg.alpha if isinstance(cfg.alpha, str) else float(cfg.alpha))
    report = _confusions(client, {"final": z, "local": z_l, "external": z_e}, int(meta["num_classes"]))
    report.update(alpha=float(alpha), receive_seconds=time.perf_counter() - t0)
    return _reply(message, None, report)


def _spear_z(client, settings: FlowerSettings):
    cfg, _ = settings.spear_config.for_variant(settings.spear_variant)
    return spear.ppr_propagate(client.x, client.edge_index, cfg.T, cfg.a)


def spear_upload(message, context, default_dir=None):
    client, meta = _partition(context, default_dir)
    s = _settings(message)
    t0 = time.perf_counter()
    c = int(meta["num_classes"])
    if client.num_nodes == 0 or not bool(client.train_mask.any()):
        data = b""  # holds no class: sends nothing (as spear.core.upload_bytes counts it)
    else:
        data = spear.serialize_upload(*spear.class_prototypes(_spear_z(client, s), client.y, client.train_mask, c))
    return _reply(message, data,
                  {"partition_id": client.index, "num_classes": c, "upload_seconds": time.perf_counter() - t0}, meta)


def spear_receive(message, context, default_dir=None):
    client, meta = _partition(context, default_dir)
    s = _settings(message)
    t0 = time.perf_counter()
    g, present = wire.parse_spear_return(wire.blob(message.content[wire.PAYLOAD]))
    c = int(meta["num_classes"])
    if g.shape != (c, int(meta["num_features"])):
        raise ConfigError(f"global prototypes of shape {tuple(g.shape)} do not fit this client's data")
    scores = spear.cosine_scores(_spear_z(client, s), g, present)
    report = _confusions(client, {"final": scores}, c)
    report.update(receive_seconds=time.perf_counter() - t0)
    return _reply(message, None, report)


def make_client_app(partition_dir=None, fail_partitions=()):
    """A ``ClientApp`` serving PACE and SPEAR; ``partition_dir`` is the default when the
    node_config names none. ``fail_partitions``: partition ids that drop out before uploading
    (they raise, as a crashed or disconnected client would) — for tests of the server's handling."""
    from flwr.clientapp import ClientApp

    app = ClientApp()
    drop = {int(k) for k in fail_partitions}

    def guarded(fn, upload: bool):
        def handler(message, context):
            if upload and int(dict(context.node_config).get("partition-id", -1)) in drop:
                raise ConnectionError("client dropped out before upload")
            return fn(message, context, partition_dir)
        return handler

    app.train("pace_upload")(guarded(pace_upload, True))
    app.evaluate("pace_receive")(guarded(pace_receive, False))
    app.train("spear_upload")(guarded(spear_upload, True))
    app.evaluate("spear_receive")(guarded(spear_receive, False))
    return app
