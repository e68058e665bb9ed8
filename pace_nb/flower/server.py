"""The ServerApp: one round of PACE or SPEAR over Flower messages (PACE Fig. 2 step 2; SPEAR server).

The server holds no data. It broadcasts the run's settings, receives each client's upload
bytes, parses them (:func:`pace_nb.methods.pace.protocol.server` for PACE — RegMean consensus
and per-receiver corrections, Eq. 6–8; :func:`pace_nb.methods.spear.core.global_prototypes`
for SPEAR), sends every receiver its own return bytes, and turns the clients' reports (α,
confusion counts) into result rows of the ``run_protocol`` schema. Clients that fail or do not
answer before ``timeout`` are dropped and reported (``params.flower.dropped``); the round
proceeds with the rest. A malformed message stops the run with a
:class:`~pace_nb.core.errors.DataCorruptionError` naming the client; nothing is stored.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from pace_nb.core.errors import ConfigError, DataCorruptionError
from pace_nb.core.schema import COLUMNS
from pace_nb.flower import wire
from pace_nb.flower.settings import FlowerSettings
from pace_nb.methods import metrics
from pace_nb.methods.evaluation import make_row
from pace_nb.methods.pace import lowrank
from pace_nb.methods.pace import protocol as pace
from pace_nb.methods.spear import core as spear

NAN = float("nan")


@dataclass
class Reply:
    """One client's answer: who (node, partition), its payload bytes and report."""

    node_id: int
    partition_id: int
    payload: bytes | None
    report: dict[str, Any]
    federation: dict[str, Any]
    message_bytes: int


@dataclass
class FlowerOutcome:
    """What a run produced: result rows, per-client wire sizes, dropped clients, timings (s)."""

    rows: pd.DataFrame
    wire: pd.DataFrame
    dropped: list[dict[str, Any]]
    timings: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)

    def finish(self, total: float, runtime: str, **extra: Any) -> "FlowerOutcome":
        """Add the runner's wall time: ``startup = total − round``; ``client_compute`` (the
        clients' own seconds, summed) and ``overhead = total − client_compute − server_compute``
        (engine/process start-up, app loading, transport)."""
        cols = [c for c in ("train_seconds", "upload_seconds", "receive_seconds") if c in self.wire]
        client = float(self.wire[cols].sum().sum()) if cols else 0.0
        self.timings.update(total=total, startup=total - self.timings["round"], client_compute=client,
                            overhead=total - client - self.timings["server_compute"], runtime=runtime, **extra)
        return self

    def to_json_dict(self) -> dict[str, Any]:
        def records(frame):
            return frame.astype(object).where(pd.notna(frame), None).to_dict("records")
        return {"settings": self.settings, "rows": records(self.rows), "wire": records(self.wire),
                "dropped": self.dropped, "timings": self.timings}


def message_size(message) -> int:
    """Bytes of a Flower message as its runtime ships it: the deflated message and its records."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


def wait_for_nodes(grid, settings: FlowerSettings) -> list[int]:
    """Node ids once ``num_clients`` SuperNodes are connected (or ``min_clients`` at ``timeout``)."""
    t_end = time.monotonic() + settings.timeout
    while True:
        nodes = sorted(int(n) for n in grid.get_node_ids())
        if len(nodes) >= settings.num_clients or time.monotonic() >= t_end:
            break
        time.sleep(0.2)
    if len(nodes) < settings.min_clients:
        raise ConfigError(f"only {len(nodes)} SuperNode(s) connected within {settings.timeout:g} s; "
                          f"need at least {settings.min_clients}")
    return nodes[: settings.num_clients]


def exchange(grid, settings: FlowerSettings, message_type: str, nodes: list[int],
             payloads: dict[int, bytes] | None = None, group: str = "1") -> tuple[list[Reply], list[dict], dict[int, int]]:
    """Send one message per node, collect the replies → (replies, dropped, sent message sizes)."""
    from flwr.app import ConfigRecord, Message, RecordDict

    out, sizes = [], {}
    for n in nodes:
        content = RecordDict({wire.CONFIG: ConfigRecord(settings.to_record())})
        if payloads is not None:
            content[wire.PAYLOAD] = ConfigRecord({wire.BLOB: payloads[n]})
        msg = Message(content, dst_node_id=n, message_type=message_type, group_id=group)
        sizes[n] = message_size(msg)
        out.append(msg)
    replies, dropped, seen = [], [], set()
    for r in grid.send_and_receive(out, timeout=settings.timeout):
        node = int(r.metadata.src_node_id)
        seen.add(node)
        if r.has_error():
            dropped.append({"node_id": node, "stage": message_type, "reason": str(r.error.reason)})
            continue
        who = f"client on node {node}"
        rep = r.content.get(wire.REPORT)
        if rep is None or "partition_id" not in rep:
            raise DataCorruptionError(f"{who} sent a {message_type} reply without a report")
        report = {k: rep[k] for k in rep.keys()}
        payload = wire.blob(r.content.get(wire.PAYLOAD)) if payloads is None else None
        fed = dict(r.content[wire.CONFIG]) if wire.CONFIG in r.content else {}
        replies.append(Reply(node, int(report["partition_id"]), payload, report, fed, message_size(r)))
    for n in nodes:
        if n not in seen:
            dropped.append({"node_id": n, "stage": message_type, "reason": f"no reply within {settings.timeout:g} s"})
    ids = [r.partition_id for r in replies]
    if len(set(ids)) != len(ids):
        raise DataCorruptionError(f"two clients claim the same partition id: {sorted(ids)}")
    return sorted(replies, key=lambda r: r.partition_id), dropped, sizes


def _pace_server(replies: list[Reply], cfg) -> tuple[list[bytes], int]:
    """Parse the uploads (naming a malformed one), run the in-process server → (returns, dense bytes)."""
    headers = []
    for r in replies:
        try:
            msg = lowrank.deserialize(r.payload)
        except DataCorruptionError as exc:
            raise DataCorruptionError(f"client {r.partition_id} (node {r.node_id}) sent a malformed upload: {exc}") from None
        headers.append({n: c.shape for n, c in msg.items()})
        if headers[-1] != headers[0]:
            raise DataCorruptionError(f"client {r.partition_id} uploaded tensors {headers[-1]} that do not "
                                      f"match client {replies[0].partition_id}'s {headers[0]}")
    dense = 4 * sum(int(np.prod(s)) for n, s in headers[0].items() if n.startswith(pace.DELTA))
    return pace.server([r.payload for r in replies], cfg), dense


def _spear_server(replies: list[Reply], num_classes: int, cfg, aggregation: str) -> bytes:
    ps, ns = [], []
    for r in replies:
        try:
            p, n = wire.spear_upload_tensors(r.payload, num_classes)
        except DataCorruptionError as exc:
            raise DataCorruptionError(f"client {r.partition_id} (node {r.node_id}): {exc}") from None
        ps.append(p)
        ns.append(n)
    features = {p.shape[1] for p, n in zip(ps, ns) if bool((n > 0).any())}
    if len(features) > 1:
        raise DataCorruptionError(f"SPEAR uploads disagree on the feature dimension: {sorted(features)}")
    f = features.pop() if features else ps[0].shape[1]
    P = torch.stack([p if p.shape[1] == f else torch.zeros(num_classes, f) for p in ps])
    g, present = spear.global_prototypes(P, torch.stack(ns), cfg.gamma, aggregation)
    return wire.spear_return(g, present)


def _scores(conf, c: int) -> dict[str, float]:
    return metrics.scores(*wire.pairs(conf, c), c)


def _acc(conf, c: int) -> float:
    return metrics.accuracy(*wire.pairs(conf, c))


def result_rows(reports: list[dict], num_classes: int, base: dict, *, up: list[int], down: list[int],
                dense_bytes: int | None, has_local: bool) -> list[dict]:
    """Rows (receivers + pooled) from the clients' reports, as :func:`evaluate_method` builds them."""
    pct = lambda x: 100.0 * x if x == x else NAN
    ratio = lambda b: 100.0 * b / dense_bytes if dense_bytes else NAN
    rows = []
    alphas = [float(r.get("alpha", NAN)) for r in reports]
    for rep, a, u, d in zip(reports, alphas, up, down):
        s = _scores(rep["confusion_final"], num_classes)
        rows.append(make_row(**base, receiver=rep["partition_id"], acc=pct(s["acc"]), f1_weighted=pct(s["f1_weighted"]),
                             f1_macro=pct(s["f1_macro"]), alpha=a,
                             acc_local=pct(_acc(rep["confusion_local"], num_classes)) if has_local else NAN,
                             acc_external=pct(_acc(rep["confusion_external"], num_classes)) if has_local else NAN,
                             bytes_up=int(u), bytes_down=int(d), upload_ratio=ratio(u), return_ratio=ratio(d),
                             n_test=int(rep["n_test"])))
    total = {k: np.sum([r[k] for r in reports], axis=0) for k in wire.REPORT_KEYS[2:] if k in reports[0]}
    s = _scores(total["confusion_final"], num_classes)
    finite = [a for a in alphas if a == a]
    rows.append(make_row(**base, receiver=-1, acc=pct(s["acc"]), f1_weighted=pct(s["f1_weighted"]),
                         f1_macro=pct(s["f1_macro"]), alpha=float(np.mean(finite)) if finite else NAN,
                         acc_local=pct(_acc(total["confusion_local"], num_classes)) if has_local else NAN,
                         acc_external=pct(_acc(total["confusion_external"], num_classes)) if has_local else NAN,
                         bytes_up=int(sum(up)), bytes_down=int(sum(down)),
                         upload_ratio=float(np.mean([ratio(u) for u in up])) if dense_bytes else NAN,
                         return_ratio=float(np.mean([ratio(d) for d in down])) if dense_bytes else NAN,
                         n_test=int(sum(r["n_test"] for r in reports))))
    return rows


def _federation(replies: list[Reply]) -> dict[str, Any]:
    feds = [r.federation for r in replies]
    if any(f != feds[0] for f in feds):
        raise DataCorruptionError("the clients belong to different federations (dataset/partition/K differ)")
    classes = {int(r.report["num_classes"]) for r in replies}
    if len(classes) != 1:
        raise DataCorruptionError(f"the clients disagree on the number of classes: {sorted(classes)}")
    return {**feds[0], "num_classes": classes.pop()}


def run_round(grid, settings: FlowerSettings) -> FlowerOutcome:
    """The whole one-shot round on a Flower ``Grid`` (module docstring)."""
    t = {"start": time.perf_counter()}
    nodes = wait_for_nodes(grid, settings)
    t["nodes"] = time.perf_counter()
    m = settings.method
    ups, dropped, sent_up = exchange(grid, settings, wire.UPLOAD[m], nodes)
    t["uploads"] = time.perf_counter()
    if len(ups) < settings.min_clients:
        raise ConfigError(f"only {len(ups)} client(s) uploaded (need {settings.min_clients}); dropped: {dropped}")
    fed = _federation(ups)
    c = fed["num_classes"]
    if m == "pace":
        cfg = settings.pace_config
        returns, dense = _pace_server(ups, cfg)
    else:
        cfg, aggregation = settings.spear_config.for_variant(settings.spear_variant)
        returns, dense = [_spear_server(ups, c, cfg, aggregation)] * len(ups), None
    t["server"] = time.perf_counter()
    by_node = {r.node_id: b for r, b in zip(ups, returns)}
    reps, dropped2, sent_down = exchange(grid, settings, wire.RECEIVE[m], [r.node_id for r in ups], by_node, group="2")
    t["reports"] = time.perf_counter()
    reports = [wire.check_report(r.report, c, f"client {r.partition_id}", has_local=(m == "pace")) for r in reps]
    done = {r.node_id for r in reps}
    kept = [r for r in ups if r.node_id in done]
    dropped = dropped + dropped2
    part_of = {r.node_id: r.partition_id for r in ups}
    for d in dropped:
        d["partition_id"] = part_of.get(d["node_id"])
    flower = {"runtime": "flower", "participants": [r.partition_id for r in kept],
              "dropped": [d["partition_id"] if d["partition_id"] is not None else f"node {d['node_id']}" for d in dropped]}
    if m == "pace":
        params = {"pace": asdict(cfg), "train": asdict(settings.train_config), "flower": flower}
        base = dict(seed=settings.seed, method="pace", variant=settings.variant, rank=cfg.rank)
    else:
        params = {"spear": asdict(cfg), "aggregation": aggregation, "flower": flower}
        base = dict(seed=int(fed.get("seed", -1)), method="spear", variant=settings.spear_variant, rank=0)
    base.update(dataset=fed.get("dataset"), partition=fed.get("scheme"), num_clients=int(fed.get("num_clients", len(nodes))),
                seconds=t["reports"] - t["nodes"], params=params)
    up = [len(r.payload) for r in kept]
    down = [len(by_node[r.node_id]) for r in kept]
    rows = pd.DataFrame(result_rows(reports, c, base, up=up, down=down, dense_bytes=dense, has_local=(m == "pace")))
    rep_size = {r.node_id: r.message_bytes for r in reps}
    rep_time = {r.node_id: r.report.get("receive_seconds", NAN) for r in reps}
    wire_rows = pd.DataFrame([{"partition_id": r.partition_id, "node_id": r.node_id, "payload_up": len(r.payload),
                               "payload_down": len(by_node[r.node_id]), "message_up": r.message_bytes,
                               "message_down": sent_down[r.node_id], "message_config": sent_up[r.node_id],
                               "message_report": rep_size[r.node_id],
                               **{k: r.report[k] for k in ("train_seconds", "upload_seconds") if k in r.report},
                               "receive_seconds": rep_time[r.node_id]}
                              for r in kept])
    timings = {"wait_nodes": t["nodes"] - t["start"], "upload_round": t["uploads"] - t["nodes"],
               "server_compute": t["server"] - t["uploads"], "return_round": t["reports"] - t["server"],
               "round": t["reports"] - t["nodes"]}
    return FlowerOutcome(rows[list(COLUMNS)], wire_rows, dropped, timings, settings.to_record())


def make_server_app(settings: FlowerSettings | None = None, sink: Callable[[FlowerOutcome], None] | None = None):
    """A ``ServerApp`` running :func:`run_round`. Settings: ``settings`` or the run config
    (``flwr run --run-config``); an ``out`` run-config key names a JSON file for the outcome,
    written atomically after the round succeeded."""
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        run_config = dict(context.run_config or {})
        out = run_config.pop("out", "")
        s = settings or FlowerSettings.from_mapping(run_config)
        outcome = run_round(grid, s)
        if sink is not None:
            sink(outcome)
        if out:
            from pace_nb.core.io import atomic_write_json

            atomic_write_json(out, outcome.to_json_dict())

    return app
