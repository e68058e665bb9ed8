"""The ServerApp: one round of any one-shot method over Flower messages (PACE Fig. 2 step 2; SPEAR
and the one-shot baselines' servers), through the method's adapter (:mod:`pace_nb.flower.adapters`).

The server broadcasts the run's settings, receives each client's upload bytes, screens them,
and runs the method's server phase on the admitted bytes alone (PACE: RegMean consensus and
per-receiver corrections, Eq. 6–8; SPEAR: shrinkage aggregation of the prototypes; a one-shot
baseline: its synthesis and server training). Then the method's evaluation: PACE sends every
receiver its own return bytes and turns their reports (α, confusion counts) into rows; SPEAR
and the one-shot baselines are evaluated as in-process, on the complete graph, which only the
evaluator's file holds (``evaluation``, :func:`~pace_nb.flower.partitions.export_evaluation`;
PACE's server holds no data). The rows come from the in-process row builders. Clients that fail or do not
answer before ``timeout`` are dropped and reported (``params.flower.dropped``); the round
proceeds with the rest. The server trusts no client (:mod:`pace_nb.flower.screening`): who a
client is comes from the node addressed, every field is checked before use, and an invalid
message excludes that client only — named, with the reason, in ``params.flower.excluded`` and
``dropped`` — while the others' round goes on.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import COLUMNS
from pace_nb.flower import screening, wire
from pace_nb.flower.settings import FlowerSettings
from pace_nb.flower.adapters import Adapter, make_adapter
from pace_nb.methods.phases import Failure

NAN = float("nan")


@dataclass
class Reply:
    """One client's answer: who (node, partition), its payload bytes and report. ``payload``,
    ``report`` and ``federation`` are as received (possibly absent, None) until :mod:`screening`
    checks them: typed ``Any``, as the screening functions take them."""

    node_id: int
    partition_id: int
    payload: Any
    report: Any
    federation: Any
    message_bytes: int
    parsed: Any = None


@dataclass
class FlowerOutcome:
    """What a run produced: result rows, per-client wire sizes, dropped clients, timings (s)."""

    rows: pd.DataFrame
    wire: pd.DataFrame
    dropped: list[dict[str, Any]]
    timings: dict[str, Any]  # seconds, and the runner's name under "runtime"
    settings: dict[str, Any] = field(default_factory=dict)

    def finish(self, total: float, runtime: str, **extra: Any) -> FlowerOutcome:
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


def admit_uploads(ups: list[Reply], settings: FlowerSettings, adapter: Adapter | None = None,
                  view: screening.FederationManifest | None = None) -> tuple[list[Reply], list[dict], int, dict]:
    """Checked uploads → (admitted, excluded, num_classes, federation). Identity: a node's claimed
    partition id must be valid, claimed by no other node and, with the federation's public
    ``view``, proven by that partition's credential; every field is typed and bounded, the
    federation facts and class count are the view's; the payload's size is checked before it is
    parsed (by the method's adapter, which checks its layout and every tensor's magnitude against
    the view); federation facts, class counts and what the method's uploads share must agree with
    the majority."""
    adapter = adapter or make_adapter(settings)
    stage, excluded, kept = wire.UPLOAD, [], []
    for r in ups:
        try:
            pid = screening.partition_id(r.report, settings.num_clients)
            if view is not None:
                screening.credential(r.federation, pid, view)
            r.report["num_classes"] = screening.upload_report(r.report)
            fed = screening.federation(r.federation)
            if view is not None:
                screening.public_facts(fed, r.report["num_classes"], view)
            r.federation = dict(zip(screening.FEDERATION_FIELDS, fed, strict=True))
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
    unparsed = set()
    for r in kept:
        try:
            r.parsed = adapter.screen(r.payload, c, view, r.partition_id)
        except screening.Invalid as exc:
            excluded.append(_exclude(r, stage, exc))
            unparsed.add(r.node_id)
    kept = [r for r in kept if r.node_id not in unparsed]
    shared = [r for r in kept if adapter.consensus(r.parsed) is not None]  # uploads with something to agree on
    agreed = _keep_majority(shared, lambda r: adapter.consensus(r.parsed), adapter.consensus_what, stage, excluded)
    kept = [r for r in kept if r in agreed or r not in shared]
    return kept, excluded, c, (kept[0].federation if kept else {})


def _reports(reps: list[Reply], ups: list[Reply], c: int, view: screening.FederationManifest | None = None
             ) -> tuple[list[Reply], list[dict]]:
    """Receive reports checked against each node's bound partition id and, with the public
    ``view``, its published test-node count → (valid, excluded)."""
    bound = {r.node_id: r.partition_id for r in ups}
    stage, good, excluded = wire.RECEIVE, [], []
    for r in reps:
        r.partition_id = bound[r.node_id]
        try:
            r.report = screening.final_report(r.report, r.partition_id, c, has_local=True,
                                              max_test=view.num_test[r.partition_id] if view is not None
                                              else screening.MAX_TEST_NODES)
        except screening.Invalid as exc:
            excluded.append(_exclude(r, stage, exc))
            continue
        good.append(r)
    return good, excluded


def _with_flower(row: dict, flower: dict) -> dict:
    """The row with the run's Flower facts in its ``params`` (participants, dropped, excluded)."""
    params = json.loads(row["params"]) if isinstance(row.get("params"), str) and row["params"] else {}
    row["params"] = json.dumps({**params, "flower": flower}, sort_keys=True, default=str)
    return row


def _reasons(items: list[dict]) -> str:
    return "; ".join(d["reason"] for d in items)[:1500]


def check_evaluation(evaluation, fed: dict, num_classes: int) -> None:
    """The evaluator's complete graph must be the federation the admitted clients uploaded from."""
    cfg = evaluation.config or {}
    have = {"dataset": evaluation.dataset, "scheme": cfg.get("scheme", ""), "seed": int(cfg.get("seed", -1)),
            "num_clients": evaluation.num_clients, "num_features": evaluation.num_features,
            "beta": screening.optional_beta(cfg.get("beta")), "num_classes": evaluation.num_classes}
    want = {"beta": None, **fed, "num_classes": num_classes}
    diff = {k: (have[k], want[k]) for k in have if have[k] != want[k]}
    if diff:
        raise ConfigError("the evaluator's file is of another federation than the clients' uploads: "
                          + ", ".join(f"{k} {a!r} (evaluator) vs {b!r} (clients)" for k, (a, b) in diff.items()))


def _failures(admitted: list[Reply], excluded: list[dict], settings: FlowerSettings) -> list[Failure]:
    """Every partition without an admitted upload, with the server's reason (an exclusion naming
    it, else no valid upload arrived: it dropped out or its node claimed no id)."""
    why = {d["partition_id"]: d["reason"] for d in excluded if d.get("partition_id") is not None}
    sent = {r.partition_id for r in admitted}
    return [Failure(p, why.get(p, "no valid upload (dropped out)")) for p in range(settings.num_clients) if p not in sent]


def run_round(grid, settings: FlowerSettings, evaluation=None, view: screening.FederationManifest | None = None
              ) -> FlowerOutcome:
    """The whole one-shot round on a Flower ``Grid`` (module docstring). ``evaluation``: the
    :class:`~pace_nb.flower.partitions.EvaluationGraph` of a complete-graph method; ``view``: the
    federation's public facts (``federation.json``), which bind partition ids to credentials and
    bound every upload and report (without it, ids are bound by claim and only the majority and
    generic bounds apply)."""
    adapter = make_adapter(settings)
    if adapter.evaluation == "complete_graph" and evaluation is None:
        raise ConfigError(f"{settings.method} is evaluated on the complete graph (the papers' protocol): give the "
                          f"ServerApp the evaluator's file (run config 'evaluation', written by export_evaluation)")
    t = {"start": time.perf_counter()}
    nodes = wait_for_nodes(grid, settings)
    t["nodes"] = time.perf_counter()
    ups, dropped, sent_up = exchange(grid, settings, wire.UPLOAD, nodes)
    ups, excluded, c, fed = admit_uploads(ups, settings, adapter, view)
    t["uploads"] = time.perf_counter()
    if len(ups) < settings.min_clients:
        raise ConfigError(f"only {len(ups)} valid upload(s) (need {settings.min_clients}); {_reasons(dropped + excluded)}")
    ups = sorted(ups, key=lambda r: r.partition_id)
    if adapter.evaluation == "complete_graph":
        check_evaluation(evaluation, fed, c)
    phase = adapter.server([r.payload for r in ups], c, fed, partitions=[r.partition_id for r in ups],
                           failures=_failures(ups, excluded, settings), view=view)
    t["server"] = time.perf_counter()
    by_node: dict[int, bytes] = {}
    sent_down: dict[int, int] = {}
    if phase.returns is not None:
        by_node = {r.node_id: b for r, b in zip(ups, phase.returns, strict=True)}
        reps, dropped2, sent_down = exchange(grid, settings, wire.RECEIVE, [r.node_id for r in ups], by_node, group="2")
        reps, excluded2 = _reports(reps, ups, c, view)
        dropped, excluded = dropped + dropped2, excluded + excluded2
        if not reps:
            raise ConfigError(f"no client returned a valid report; {_reasons(dropped + excluded)}")
        reps = sorted(reps, key=lambda r: r.partition_id)
        done = {r.node_id for r in reps}
        kept = [r for r in ups if r.node_id in done]
    else:
        reps, kept = [], ups
    t["reports"] = time.perf_counter()
    part_of = {r.node_id: r.partition_id for r in ups}
    for d in dropped:
        d["partition_id"] = part_of.get(d["node_id"])
    dropped = dropped + excluded
    flower = {"runtime": "flower", "participants": [r.partition_id for r in kept],
              "dropped": [d["partition_id"] if d["partition_id"] is not None else f"node {d['node_id']}" for d in dropped],
              "excluded": [d["reason"] for d in excluded]}
    up = [len(r.payload) for r in kept]
    down = [len(by_node.get(r.node_id, b"")) for r in kept]
    reports = [r.report for r in (reps if reps else kept)]
    rows = adapter.rows(phase, up=up, down=down, reports=reports, partitions=[r.partition_id for r in kept],
                        num_classes=c, fed=fed, seconds=t["reports"] - t["nodes"], evaluation=evaluation)
    rows = pd.DataFrame([_with_flower(row, flower) for row in rows])
    rep = {r.node_id: r for r in reps}
    wire_rows = pd.DataFrame([{"partition_id": r.partition_id, "node_id": r.node_id, "payload_up": len(r.payload),
                               "payload_down": len(by_node.get(r.node_id, b"")), "message_up": r.message_bytes,
                               "message_down": sent_down.get(r.node_id, 0), "message_config": sent_up[r.node_id],
                               "message_report": rep[r.node_id].message_bytes if r.node_id in rep else 0,
                               **{k: r.report[k] for k in ("train_seconds", "upload_seconds") if k in r.report},
                               "receive_seconds": rep[r.node_id].report.get("receive_seconds", NAN)
                               if r.node_id in rep else NAN}
                              for r in kept])
    timings = {"wait_nodes": t["nodes"] - t["start"], "upload_round": t["uploads"] - t["nodes"],
               "server_compute": t["server"] - t["uploads"], "return_round": t["reports"] - t["server"],
               "round": t["reports"] - t["nodes"]}
    return FlowerOutcome(rows[list(COLUMNS)], wire_rows, dropped, timings, settings.to_record())


def federation_manifest(source) -> screening.FederationManifest:
    """The :class:`~pace_nb.flower.screening.FederationManifest` of an exported federation (its folder)."""
    if isinstance(source, screening.FederationManifest):
        return source
    from pace_nb.flower.partitions import read_meta

    try:
        return screening.FederationManifest.from_meta(read_meta(source))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: not a federation the server can screen with ({exc})") from None


def make_server_app(settings: FlowerSettings | None = None, sink: Callable[[FlowerOutcome], None] | None = None,
                    evaluation=None, federation=None):
    """A ``ServerApp`` running :func:`run_round`. Settings: ``settings`` or the run config
    (``flwr run --run-config``); an ``out`` run-config key names a JSON file for the outcome,
    written atomically after the round succeeded; ``evaluation`` (or that run-config key) is the
    evaluator's file (or its :class:`~pace_nb.flower.partitions.EvaluationGraph`) that
    complete-graph methods need, read only by them; ``federation`` (or that run-config key) is
    the folder of the exported ``federation.json``, the public view the server screens with."""
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        run_config = dict(context.run_config or {})
        out = run_config.pop("out", "")
        source = evaluation if evaluation is not None else run_config.pop("evaluation", "") or None
        run_config.pop("evaluation", None)
        public = federation if federation is not None else run_config.pop("federation", "") or None
        run_config.pop("federation", None)
        s = settings or FlowerSettings.from_mapping(run_config)
        view = federation_manifest(public) if public is not None else None
        ev = source
        if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
            ev = None
            if make_adapter(s).evaluation == "complete_graph":  # only such a method reads the complete graph
                from pace_nb.flower.partitions import load_evaluation

                ev = load_evaluation(source)
        outcome = run_round(grid, s, ev, view)
        if sink is not None:
            sink(outcome)
        if out:
            from pace_nb.core.io import atomic_write_json

            atomic_write_json(out, outcome.to_json_dict())

    return app
