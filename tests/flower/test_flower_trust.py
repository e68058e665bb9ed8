"""A server that trusts no client: malicious uploads and reports in the in-process Flower grid.

Each case alters one client's message; the server must exclude that client only, name it, and
give the honest clients the rows they get when that client simply drops out."""
from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

flwr = pytest.importorskip("flwr")

from flwr.app import ConfigRecord  # noqa: E402

from pace_nb.core.errors import ConfigError  # noqa: E402
from pace_nb.data.federation import build_federated  # noqa: E402
from pace_nb.flower import wire  # noqa: E402
from pace_nb.flower.client import make_client_app  # noqa: E402
from pace_nb.flower.inprocess import run_inprocess  # noqa: E402
from pace_nb.flower.partitions import export_evaluation, export_partitions  # noqa: E402
from pace_nb.flower.settings import FlowerSettings  # noqa: E402
from pace_nb.methods.pace import lowrank  # noqa: E402

K = 3
PACE = FlowerSettings(num_clients=K, epochs=5)
SPEAR = FlowerSettings(method="spear", num_clients=K)
SAME = ["receiver", "acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external", "bytes_up",
        "bytes_down", "n_test"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The clients' partition folder; the evaluator's file (complete-graph methods) beside it."""
    fg = build_federated("demo", "dirichlet", K, 2024, beta=1.0)
    root = tmp_path_factory.mktemp("federation")
    export_evaluation(fg, root / "evaluator")
    return str(export_partitions(fg, root / "partitions"))


def _run(parts, app, settings, public=True):
    """One in-process round; the server holds the federation's public view unless ``public`` is False."""
    return run_inprocess(app, settings, evaluation=str(Path(parts).parent / "evaluator"),
                         federation=parts if public else None)


def _rows(out, receivers=None):
    r = out.rows if receivers is None else out.rows[out.rows.receiver.isin(receivers)]
    return r[SAME].sort_values("receiver").reset_index(drop=True)


@pytest.fixture(scope="module")
def without(parts):
    """Runs where the named clients fail before uploading (the honest reference)."""
    cache = {}

    def get(settings, *bad):
        key = (settings.method, bad)
        if key not in cache:
            cache[key] = _run(parts, make_client_app(parts, drop_partitions=bad), settings)
        return cache[key]
    return get


def _app(parts, mutate, stage, who=0):
    real = make_client_app(parts)

    def app(message, context):
        reply = real(message, context)
        if int(context.node_config["partition-id"]) == who and message.metadata.message_type == stage:
            mutate(reply.content)
        return reply
    return app


def _payload(blob: bytes):
    return lambda c: c.__setitem__(wire.PAYLOAD, ConfigRecord({wire.BLOB: blob}))


def _report(key, value):
    return lambda c: c[wire.REPORT].__setitem__(key, value)


def _nan_pace(c):
    carriers = lowrank.deserialize(wire.blob(c[wire.PAYLOAD]))
    first = next(iter(carriers.values()))
    (first.dense if first.dense is not None else first.left).view(-1)[0] = float("nan")
    c[wire.PAYLOAD] = ConfigRecord({wire.BLOB: lowrank.serialize(carriers)})


def _carriers(edit):
    """Rewrite client 0's PACE-wire-format upload: ``edit(tensors)`` on its decoded tensors."""
    def mutate(c):
        tensors = lowrank.reconstruct(lowrank.deserialize(wire.blob(c[wire.PAYLOAD])))
        edit(tensors)
        c[wire.PAYLOAD] = ConfigRecord({wire.BLOB: lowrank.serialize(lowrank.dense_carriers(tensors))})
    return mutate


def _pace_scaled(value):
    """Every entry of client 0's ΔW₁ carriers set to ``value`` (finite, same layout)."""
    def mutate(c):
        carriers = lowrank.deserialize(wire.blob(c[wire.PAYLOAD]))
        for t in carriers["delta/conv1.weight"].tensors():
            t.fill_(value)
        c[wire.PAYLOAD] = ConfigRecord({wire.BLOB: lowrank.serialize(carriers)})
    return mutate


def _header(entries) -> bytes:
    head = json.dumps(entries).encode()
    return lowrank.MAGIC + struct.pack("<I", len(head)) + head


UPLOAD_CASES = {
    "bad magic": (_payload(b"not a PACE message"), "bad magic"),
    "no byte payload": (lambda c: c.__setitem__(wire.PAYLOAD, ConfigRecord({"other": 1})), "not bytes"),
    "NaN tensor": (_nan_pace, "NaN"),
    "header entry not a 4-list": (_payload(_header([[1, 2]])), "malformed PACE upload"),
    "string rank": (_payload(_header([["conv1.weight", "lowrank", [2, 2], "six"]])), "malformed PACE upload"),
    "partition_id -1": (_report("partition_id", -1), "partition_id = -1"),
    "partition_id 99": (_report("partition_id", 99), "partition_id = 99"),
    "partition_id list": (_report("partition_id", [0]), "not an integer"),
    "num_classes missing": (lambda c: c[wire.REPORT].__delitem__("num_classes"), "num_classes"),
    "num_classes wrong": (_report("num_classes", 7), "num_classes"),
    "federation forged": (lambda c: c[wire.CONFIG].__setitem__("dataset", "Cora"), "federation"),
    "oversized": (None, "above the limit"),  # one byte above the honest clients' largest upload
    "carriers 1e30": (_pace_scaled(1e30), "outside what a real client sends"),
    "3 features wider": (_carriers(lambda t: t.__setitem__("delta/conv1.weight", torch.zeros(64, 603))),
                         "layout differs"),
    "header describes 4 TB": (_payload(_header([["delta/conv1.weight", "dense", [1 << 20, 1 << 20], 0]])),
                              "its header describes"),
}


@pytest.mark.parametrize("case", sorted(UPLOAD_CASES))
def test_invalid_pace_upload_excludes_only_that_client(case, parts, without):
    mutate, reason = UPLOAD_CASES[case]
    settings = PACE
    if case == "oversized":
        limit = int(_run(parts, make_client_app(parts), PACE).wire.payload_up.max())
        settings = FlowerSettings(num_clients=K, epochs=5, max_upload_bytes=limit)
        mutate = _payload(lowrank.MAGIC + bytes(limit + 1 - len(lowrank.MAGIC)))
    out = _run(parts, _app(parts, mutate, wire.UPLOAD), settings)
    pd.testing.assert_frame_equal(_rows(out), _rows(without(PACE, 0)), check_exact=True)
    bad = [d for d in out.dropped if d["kind"] == "invalid"]
    assert len(bad) == 1 and bad[0]["node_id"] == 1 and reason in bad[0]["reason"], out.dropped
    assert "node 1" in bad[0]["reason"]
    assert reason in json.loads(out.rows.params.iloc[0])["flower"]["excluded"][0]


def test_forged_duplicate_id(parts, without):
    """With the public view the forger's credential is not client 1's: only the forger is excluded;
    a server without it cannot tell who is honest and excludes both claimants."""
    out = _run(parts, _app(parts, _report("partition_id", 1), wire.UPLOAD), PACE)
    pd.testing.assert_frame_equal(_rows(out), _rows(without(PACE, 0)), check_exact=True)
    (bad,) = out.dropped
    assert bad["node_id"] == 1 and "not assigned to this node" in bad["reason"]
    blind = _run(parts, _app(parts, _report("partition_id", 1), wire.UPLOAD), PACE, public=False)
    assert sorted(d["node_id"] for d in blind.dropped) == [1, 2]
    assert all("also claimed" in d["reason"] for d in blind.dropped)


def test_claim_of_an_unassigned_id_is_refused(parts, without):
    """Client 2 drops out; client 0 claims id 2. Its claim is refused (its credential is partition 0's),
    so no rows appear as receiver 2 and the honest rows are those of a run without clients 0 and 2."""
    real = make_client_app(parts, drop_partitions=(2,))

    def app(message, context):
        reply = real(message, context)
        if int(context.node_config["partition-id"]) == 0 and message.metadata.message_type == wire.UPLOAD:
            reply.content[wire.REPORT]["partition_id"] = 2
        return reply
    out = _run(parts, app, PACE)
    pd.testing.assert_frame_equal(_rows(out), _rows(without(PACE, 0, 2)), check_exact=True)
    bad = [d for d in out.dropped if d["kind"] == "invalid"]
    assert len(bad) == 1 and bad[0]["node_id"] == 1 and "partition_id 2 is not assigned" in bad[0]["reason"]
    assert set(out.rows.receiver) == {1, -1}


def test_swapped_id_in_round_two_and_bad_alpha(parts):
    honest = _run(parts, make_client_app(parts), PACE)
    for mutate, reason in ((_report("partition_id", 2), "uploaded as 0"), (_report("alpha", 1e300), "alpha")):
        out = _run(parts, _app(parts, mutate, wire.RECEIVE), PACE)
        # client 0's upload was valid, so the others' returns are the honest ones: their rows too
        pd.testing.assert_frame_equal(_rows(out, [1, 2]), _rows(honest, [1, 2]), check_exact=True)
        assert set(out.rows.receiver) == {1, 2, -1} and (out.rows.receiver == -1).sum() == 1
        assert len(out.dropped) == 1 and reason in out.dropped[0]["reason"] and "client 0" in out.dropped[0]["reason"]


def _nan_spear(c):
    with np.load(io.BytesIO(wire.blob(c[wire.PAYLOAD])), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["prototypes"][0, 0] = np.nan
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    c[wire.PAYLOAD] = ConfigRecord({wire.BLOB: buf.getvalue()})


def _spear(edit):
    """Rewrite client 0's SPEAR upload: ``edit(arrays)`` on its NPZ arrays."""
    def mutate(c):
        with np.load(io.BytesIO(wire.blob(c[wire.PAYLOAD])), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        edit(arrays)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        c[wire.PAYLOAD] = ConfigRecord({wire.BLOB: buf.getvalue()})
    return mutate


SPEAR_CASES = {
    "NaN prototypes": (_nan_spear, "NaN"),
    "prototypes 3e38": (_spear(lambda a: a["prototypes"].fill(3e38)), "L2 norm"),
    "counts 2^31-1": (_spear(lambda a: a["counts"].fill(2**31 - 1)), "above the client's"),
    "fractional counts": (_spear(lambda a: a.__setitem__("counts", a["counts"] + 0.5)), "not <i4"),
    "prototypes 3 wider": (_spear(lambda a: a.__setitem__("prototypes", np.pad(a["prototypes"], ((0, 0), (0, 3))))),
                           "malformed SPEAR upload"),
}


@pytest.mark.parametrize("case", sorted(SPEAR_CASES))
def test_invalid_spear_upload_excludes_only_that_client(case, parts, without):
    mutate, reason = SPEAR_CASES[case]
    out = _run(parts, _app(parts, mutate, wire.UPLOAD), SPEAR)
    pd.testing.assert_frame_equal(_rows(out), _rows(without(SPEAR, 0)), check_exact=True)
    assert len(out.dropped) == 1 and reason in out.dropped[0]["reason"] and "node 1" in out.dropped[0]["reason"]


def _forged_counts(n):
    """Client 0's receive report: consistent all-correct confusion matrices over ``n`` test nodes."""
    def mutate(c):
        rep = c[wire.REPORT]
        matrix = [n] + [0] * (len(rep["confusion_final"]) - 1)
        for key in ("confusion_final", "confusion_local", "confusion_external"):
            rep[key] = matrix
        rep["n_test"] = n
    return mutate


@pytest.mark.parametrize("n", [10**6, 2**34])
def test_forged_test_counts_are_bounded_by_the_clients_nodes(n, parts):
    """A receiver claiming more test nodes than it holds is excluded (no pooled number dominated, no
    allocation of 2^34 pairs); its upload was valid, so the others' rows are the honest run's."""
    honest = _run(parts, make_client_app(parts), PACE)
    out = _run(parts, _app(parts, _forged_counts(n), wire.RECEIVE), PACE)
    pd.testing.assert_frame_equal(_rows(out, [1, 2]), _rows(honest, [1, 2]), check_exact=True)
    assert set(out.rows.receiver) == {1, 2, -1}
    (bad,) = out.dropped
    assert f"n_test = {n} is above the client's" in bad["reason"] and "client 0" in bad["reason"]


def test_forged_test_count_below_the_nodes_but_above_the_tests_is_refused(parts):
    """``n_test`` is bounded by the client's published test-node count, not only its node count:
    a report with more test nodes than the client holds, yet fewer than its nodes, is excluded."""
    from pace_nb.flower.partitions import load_partition, read_meta

    client, _ = load_partition(parts, 0)
    n_test, n_nodes = int(client.test_mask.sum()), client.num_nodes
    assert n_test + 1 < n_nodes
    honest = _run(parts, make_client_app(parts), PACE)
    out = _run(parts, _app(parts, _forged_counts(n_test + 1), wire.RECEIVE), PACE)
    pd.testing.assert_frame_equal(_rows(out, [1, 2]), _rows(honest, [1, 2]), check_exact=True)
    assert set(out.rows.receiver) == {1, 2, -1}
    (bad,) = out.dropped
    assert f"n_test = {n_test + 1} is above the client's {n_test} test nodes" in bad["reason"]
    assert "client 0" in bad["reason"] and read_meta(parts)["num_test"][0] == n_test  # published


def test_nothing_valid_is_a_clear_error(parts):
    real = make_client_app(parts)

    def every(stage, mutate):
        def app(message, context):
            reply = real(message, context)
            if message.metadata.message_type == stage:
                mutate(reply.content)
            return reply
        return app
    with pytest.raises(ConfigError, match="no client returned a valid report"):
        _run(parts, every(wire.RECEIVE, _report("n_test", -1)), PACE)
    with pytest.raises(ConfigError, match="no admitted SPEAR client uploaded a prototype"):
        _run(parts, every(wire.UPLOAD, _payload(b"")), SPEAR)
    with pytest.raises(ConfigError, match="valid upload"):
        _run(parts, every(wire.UPLOAD, _payload(b"junk")), PACE)


ONESHOT = FlowerSettings(method="centroid_sbm", num_clients=K, epochs=5)
ONESHOT_CASES = {
    "bad magic": (_payload(b"not a message"), "malformed centroid_sbm upload"),
    "NaN tensor": (_nan_pace, "holds NaN/inf"),
    "partition_id 99": (_report("partition_id", 99), "partition_id = 99"),
    "oversized": (None, "above the limit"),
    "values 3e38": (_carriers(lambda t: t["codewords"].fill_(3e38)), "outside what a real client sends"),
    "3 features wider": (_carriers(lambda t: t.__setitem__("codewords", torch.nn.functional.pad(t["codewords"], (0, 3)))),
                         "differ from what the method sends"),
    "a key missing": (_carriers(lambda t: t.pop("label_counts")), "label_counts None"),
}


@pytest.mark.parametrize("case", sorted(ONESHOT_CASES))
def test_invalid_oneshot_upload_excludes_only_that_client(case, parts, without):
    """The same screening for a one-shot baseline's uploads (PACE's wire format): the server's
    phase and its complete-graph evaluation run on the honest clients' uploads only."""
    mutate, reason = ONESHOT_CASES[case]
    settings = ONESHOT
    if case == "oversized":
        limit = int(_run(parts, make_client_app(parts), ONESHOT).wire.payload_up.max())
        settings = FlowerSettings(method="centroid_sbm", num_clients=K, epochs=5, max_upload_bytes=limit)
        mutate = _payload(lowrank.MAGIC + bytes(limit + 1 - len(lowrank.MAGIC)))
    out = _run(parts, _app(parts, mutate, wire.UPLOAD), settings)
    pd.testing.assert_frame_equal(_rows(out), _rows(without(ONESHOT, 0)), check_exact=True)
    (bad,) = out.dropped
    assert bad["kind"] == "invalid" and bad["node_id"] == 1 and reason in bad["reason"] and "node 1" in bad["reason"]
    assert json.loads(out.rows.params.iloc[0])["flower"]["participants"] == [1, 2]


def test_the_federation_facts_carry_beta_where_the_partition_has_one():
    """A Dirichlet federation's uploads carry its beta (the rows' beta column, as in process);
    a Louvain one carries none; a beta that is no concentration excludes the upload."""
    from pace_nb.flower import screening

    fed = {"dataset": "demo", "scheme": "louvain", "seed": 1, "num_clients": 3, "num_features": 8}
    assert screening.federation(fed)[-1] is None
    assert screening.federation({**fed, "scheme": "dirichlet", "beta": 0.5})[-1] == 0.5
    for bad in (0.0, float("nan"), float("inf"), "0.5", True):
        with pytest.raises(screening.Invalid, match="beta"):
            screening.federation({**fed, "beta": bad})


#: Every one-shot method with small parameters (its upload's layout, not its accuracy, is tested).
QUICK = {"centroid_sbm": {}, "dense": {"epochs": 1, "g_steps": 1, "synthesis_batch_size": 8},
         "fedcvae": {"epochs": 2, "synthetic_nodes": 50},
         "fedsd2c": {"ipc": 2, "mipc": 20, "steps": 2, "ae_epochs": 2},
         "ghost": {"gen_steps": 1, "visits": 1, "visit_steps": 1},
         "oasis": {"synth_epochs": 1, "codebook_epochs": 1, "epochs": 1}}
#: The first tensor of each method's upload that has a feature axis last (made one column wider).
WIDENED = {"centroid_sbm": "codewords", "dense": "model.conv1.weight", "fedcvae": "decoder.2.weight",
           "fedsd2c": "x", "ghost": "generator.out.weight", "oasis": "teacher.conv1.weight"}


@pytest.mark.parametrize("method, params", [*QUICK.items(), ("dense", {**QUICK["dense"], "bn": 0.1}),
                                            ("fedsd2c", {**QUICK["fedsd2c"], "ipc": 10**5})])
def test_every_oneshot_upload_is_its_declared_shapes(method, params):
    """Each method's real uploads (demo graph, every client) are exactly its declared tensors: the
    same names and every size the declared one (a free size the same wherever it stands)."""
    from pace_nb.flower import screening
    from pace_nb.methods.oneshot import make_oneshot
    from pace_nb.methods.oneshot.base import OneShotContext, client_phase
    from pace_nb.nn.training import TrainConfig, train_local

    fg = build_federated("demo", "dirichlet", K, 2024, beta=1.0)
    m, tc = make_oneshot(method, **params), TrainConfig(epochs=2)
    local = train_local(fg, (0,), tc, progress=False) if m.uses_local else None
    ctx = OneShotContext(fg, 0, tc, torch.device("cpu"), [local.model(0, k) for k in range(K)] if local else None)
    declared = m.upload_shapes(fg.num_features, fg.num_classes, tc.hidden)
    layouts = [declared] if isinstance(declared, dict) else list(declared)
    for k, client in enumerate(fg.clients):
        entries = screening.carriers_header(client_phase(m, ctx, k, client), method, shapes=declared)
        got = {n: s for n, _, s, _ in entries}
        (want,) = [w for w in layouts if set(w) == set(got)]  # the very names of one declared layout
        assert all(d == g or isinstance(d, str) for n in want for d, g in zip(want[n], got[n], strict=True)), got
        assert want is layouts[-1 if params.get("ipc") == 10**5 else 0]  # no class above ipc: the empty set


@pytest.mark.parametrize("method", sorted(QUICK))
def test_a_oneshot_upload_one_column_wider_is_excluded_by_name(method, parts, without):
    """A one-shot upload with its feature-wide tensor one column wider passes every finite/magnitude
    check but not the method's declared shapes: excluded, named; the others' rows are the drop-out run's."""
    settings = FlowerSettings(method=method, num_clients=K, epochs=5, params=QUICK[method])
    name = WIDENED[method]
    mutate = _carriers(lambda t: t.__setitem__(name, torch.nn.functional.pad(t[name], (0, 1))))
    out = _run(parts, _app(parts, mutate, wire.UPLOAD), settings)
    ref = _run(parts, make_client_app(parts, drop_partitions=(0,)), settings)
    pd.testing.assert_frame_equal(_rows(out), _rows(ref), check_exact=True)
    (bad,) = out.dropped
    assert bad["kind"] == "invalid" and bad["node_id"] == 1 and f"{name} " in bad["reason"], bad
    assert "differ from what the method sends" in bad["reason"]
    assert json.loads(out.rows.params.iloc[0])["flower"]["participants"] == [1, 2]
