"""The ServerApp: one round of PACE or SPEAR over Flower messages (PACE Fig. 2 step 2; SPEAR server).

The server holds no data. It broadcasts the run's settings, receives each client's upload
bytes, parses them (:func:`pace_nb.methods.pace.protocol.server` for PACE — RegMean consensus
and per-receiver corrections, Eq. 6–8; :func:`pace_nb.methods.spear.core.global_prototypes`
for SPEAR), sends every receiver its own return bytes, and turns the clients' reports (α,
confusion counts) into result rows of the ``run_protocol`` schema. Clients that fail or do not
answer before ``timeout`` are dropped and reported (``params.flower.dropped``); the round
proceeds with the rest. The server trusts no client (:mod:`pace_nb.flower.screening`): who a
client is comes from the node addressed, every field is checked before use, and an invalid
message excludes that client only — named, with the reason, in ``params.flower.excluded`` and
``dropped`` — while the others' round goes on.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import COLUMNS
from pace_nb.flower import screening, wire
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
    report: dict[str, Any] | None
    federation: dict[str, Any] | None
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
    """Send one message per node, collect the replies → (replies by node id, dropped, sent sizes).

    A reply is kept only from a node that was addressed, once; its fields are checked later
    (:mod:`pace_nb.flower.screening`), nothing here trusts its content."""
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
        if node not in sizes or node in seen:
            continue  # not a node this round addressed, or a second reply: ignored
        seen.add(node)
        if r.has_error():
            dropped.append({"node_id": node, "stage": message_type, "kind": "failed", "reason": str(r.error.reason)})
            continue
        rep = r.content.get(wire.REPORT)
        report = {k: rep[k] for k in rep.keys()} if rep is not None else None
        record = r.content.get(wire.PAYLOAD) if payloads is None else None
        fed = dict(r.content[wire.CONFIG]) if payloads is None and wire.CONFIG in r.content else None
        replies.append(Reply(node, -1, record.get(wire.BLOB) if record is not None else None, report, fed,
                             message_size(r)))
    for n in nodes:
        if n not in seen:
            dropped.append({"node_id": n, "stage": message_type, "kind": "failed",
                            "reason": f"no reply within {settings.timeout:g} s"})
    return sorted(replies, key=lambda r: r.node_id), dropped, sizes


def _exclude(r: Reply, stage: str, reason) -> dict:
    who = f"client {r.partition_id} (node {r.node_id})" if r.partition_id >= 0 else f"client on node {r.node_id}"
    return {"node_id": r.node_id, "stage": stage, "kind": "invalid", "reason": f"{who}: {reason}",
            "partition_id": r.partition_id if r.partition_id >= 0 else None}


def _keep_majority(replies: list[Reply], key: Callable[[Reply], Any], what: str, stage: str, excluded: list) -> list[Reply]:
    if not replies:
        return replies
    want = screening.majority(key(r) for r in replies)
    for r in replies:
        if key(r) != want:
            excluded.append(_exclude(r, stage, f"{what} {key(r)} differ from the other clients' {want}"))
    return [r for r in replies if key(r) == want]


def admit_uploads(ups: list[Reply], settings: FlowerSettings) -> tuple[list[Reply], list[dict], int, dict]:
    """Checked uploads → (admitted, excluded, num_classes, federation). Identity: a node's claimed
    partition id must be valid and claimed by no other node; every field is typed and bounded;
    federation facts, class counts and tensor shapes must agree with the majority."""
    stage, excluded, kept = wire.UPLOAD[settings.method], [], []
    for r in ups:
        try:
            pid = screening.partition_id(r.report, settings.num_clients)
            r.report["num_classes"] = screening.upload_report(r.report)
            r.federation = dict(zip(screening.FEDERATION_FIELDS, screening.federation(r.federation)))
            screening.payload(r.payload, settings.max_upload_bytes)
        except screening.Invalid as exc:
            excluded.append(_exclude(r, stage, exc))
            continue
        r.partition_id = pid
        kept.append(r)
    claims = Counter(r.partition_id for r in kept)
    for r in kept:
        if claims[r.partition_id] > 1:
            others = [q.node_id for q in kept if q.partition_id == r.partition_id and q is not r]
            excluded.append(_exclude(r, stage, f"partition_id {r.partition_id} is also claimed by node(s) {others}"))
    kept = [r for r in kept if claims[r.partition_id] == 1]
    kept = _keep_majority(kept, lambda r: tuple(r.federation.values()), "federation", stage, excluded)
    kept = _keep_majority(kept, lambda r: r.report["num_classes"], "num_classes", stage, excluded)
    c = kept[0].report["num_classes"] if kept else 0
    parsed: dict[int, Any] = {}
    for r in list(kept):
        try:
            parsed[r.node_id] = screening.pace_header(r.payload) if settings.method == "pace" else \
                screening.spear_tensors(r.payload, c)
        except screening.Invalid as exc:
            excluded.append(_exclude(r, stage, exc))
    kept = [r for r in kept if r.node_id in parsed]
    if settings.method == "pace":
        kept = _keep_majority(kept, lambda r: parsed[r.node_id], "uploaded tensors", stage, excluded)
    else:
        sized = [r for r in kept if bool((parsed[r.node_id][1] > 0).any())]
        feats = _keep_majority(sized, lambda r: parsed[r.node_id][0].shape[1], "prototype widths", stage, excluded)
        kept = [r for r in kept if r in feats or r not in sized]
    return kept, excluded, c, (kept[0].federation if kept else {})


def _pace_server(replies: list[Reply], cfg) -> tuple[list[bytes], int]:
    """The in-process PACE server on admitted uploads → (returns, dense bytes)."""
    msg = lowrank.deserialize(replies[0].payload)
    dense = 4 * sum(int(np.prod(c.shape)) for n, c in msg.items() if n.startswith(pace.DELTA))
    return pace.server([r.payload for r in replies], cfg), dense


def _spear_server(replies: list[Reply], num_classes: int, cfg, aggregation: str) -> bytes:
    ps, ns = zip(*(wire.spear_upload_tensors(r.payload, num_classes) for r in replies))
    features = {p.shape[1] for p, n in zip(ps, ns) if bool((n > 0).any())}
    if not features:
        raise ConfigError("no admitted SPEAR client uploaded a prototype (every upload was empty)")
    f = features.pop()
    P = torch.stack([p if p.shape[1] == f else torch.zeros(num_classes, f) for p in ps])
    g, present = spear.global_prototypes(P, torch.stack(list(ns)), cfg.gamma, aggregation)
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


def _reports(reps: list[Reply], ups: list[Reply], c: int, settings: FlowerSettings) -> tuple[list[Reply], list[dict]]:
    """Receive reports checked against each node's bound partition id → (valid, excluded)."""
    bound = {r.node_id: r.partition_id for r in ups}
    stage, good, excluded = wire.RECEIVE[settings.method], [], []
    for r in reps:
        r.partition_id = bound[r.node_id]
        try:
            r.report = screening.final_report(r.report, r.partition_id, c, has_local=settings.method == "pace")
        except screening.Invalid as exc:
            excluded.append(_exclude(r, stage, exc))
            continue
        good.append(r)
    return good, excluded


def run_round(grid, settings: FlowerSettings) -> FlowerOutcome:
    """The whole one-shot round on a Flower ``Grid`` (module docstring)."""
    t = {"start": time.perf_counter()}
    nodes = wait_for_nodes(grid, settings)
    t["nodes"] = time.perf_counter()
    m = settings.method
    ups, dropped, sent_up = exchange(grid, settings, wire.UPLOAD[m], nodes)
    ups, excluded, c, fed = admit_uploads(ups, settings)
    t["uploads"] = time.perf_counter()
    if len(ups) < settings.min_clients:
        raise ConfigError(f"only {len(ups)} valid upload(s) (need {settings.min_clients}); "
                          f"{'; '.join(d['reason'] for d in dropped + excluded)[:1500]}")
    ups = sorted(ups, key=lambda r: r.partition_id)
    if m == "pace":
        cfg = settings.pace_config
        returns, dense = _pace_server(ups, cfg)
    else:
        cfg, aggregation = settings.spear_config.for_variant(settings.spear_variant)
        returns, dense = [_spear_server(ups, c, cfg, aggregation)] * len(ups), None
    t["server"] = time.perf_counter()
    by_node = {r.node_id: b for r, b in zip(ups, returns)}
    reps, dropped2, sent_down = exchange(grid, settings, wire.RECEIVE[m], [r.node_id for r in ups], by_node, group="2")
    reps, excluded2 = _reports(reps, ups, c, settings)
    t["reports"] = time.perf_counter()
    dropped, excluded = dropped + dropped2, excluded + excluded2
    if not reps:
        raise ConfigError(f"no client returned a valid report; {'; '.join(d['reason'] for d in dropped + excluded)[:1500]}")
    reps = sorted(reps, key=lambda r: r.partition_id)
    reports = [r.report for r in reps]
    done = {r.node_id for r in reps}
    kept = [r for r in ups if r.node_id in done]
    part_of = {r.node_id: r.partition_id for r in ups}
    for d in dropped:
        d["partition_id"] = part_of.get(d["node_id"])
    dropped = dropped + excluded
    flower = {"runtime": "flower", "participants": [r.partition_id for r in kept],
              "dropped": [d["partition_id"] if d["partition_id"] is not None else f"node {d['node_id']}" for d in dropped],
              "excluded": [d["reason"] for d in excluded]}
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
