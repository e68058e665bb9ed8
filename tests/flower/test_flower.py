"""Every one-shot method as Flower apps (PACE, SPEAR, the one-shot baselines through one adapter):
identical rows to the in-process protocol, bytes on the messages, dropouts, malformed messages,
and a PACE server process that never holds client data."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch

flwr = pytest.importorskip("flwr")

from pace_nb.core.config import PAPER_SEEDS  # noqa: E402
from pace_nb.core.errors import ConfigError, DataCorruptionError  # noqa: E402
from pace_nb.core.schema import COLUMNS  # noqa: E402
from pace_nb.data.federation import build_federated  # noqa: E402
from pace_nb.flower import wire  # noqa: E402
from pace_nb.flower.client import make_client_app  # noqa: E402
from pace_nb.flower.inprocess import run_inprocess  # noqa: E402
from pace_nb.flower.partitions import client_file, export_evaluation, export_partitions, load_partition  # noqa: E402
from pace_nb.flower.settings import FlowerSettings  # noqa: E402
from pace_nb.methods.pace import lowrank  # noqa: E402
from pace_nb.methods.pace import protocol as pace  # noqa: E402
from pace_nb.methods.protocol import run_protocol  # noqa: E402
from pace_nb.methods.spear import core as spear  # noqa: E402
from pace_nb.nn.training import train_local  # noqa: E402

from synthetic import class_means_module  # noqa: E402

K, SEED = 3, PAPER_SEEDS[0]
SAME = ["dataset", "partition", "num_clients", "seed", "method", "variant", "rank", "receiver", "acc", "f1_weighted",
        "f1_macro", "alpha", "acc_local", "acc_external", "bytes_up", "bytes_down", "upload_ratio", "return_ratio",
        "n_test"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def fg():
    return build_federated("demo", num_clients=K)


@pytest.fixture(scope="module")
def parts(fg, tmp_path_factory):
    return str(export_partitions(fg, tmp_path_factory.mktemp("parts")))


@pytest.fixture(scope="module")
def evaluator(fg, tmp_path_factory):
    return str(export_evaluation(fg, tmp_path_factory.mktemp("evaluator")))


@pytest.fixture(scope="module")
def local(fg):
    return train_local(fg, (SEED,), progress=False)


@pytest.fixture(scope="module")
def reference(fg, local):
    return run_protocol(fg, seeds=(SEED,), methods=("pace",), local=local, progress=False)


class Tap:
    """Records the payload bytes of every message, by direction and partition."""

    def __init__(self):
        self.up, self.down, self.replies = {}, {}, []

    def __call__(self, direction, message):
        if direction == "up":
            self.replies.append(message)
        if message.has_content() and wire.PAYLOAD in message.content:
            node = message.metadata.src_node_id if direction == "up" else message.metadata.dst_node_id
            (self.up if direction == "up" else self.down)[int(node) - 1] = wire.blob(message.content[wire.PAYLOAD])


@pytest.fixture(scope="module")
def pace_run(parts):
    tap = Tap()
    out = run_inprocess(make_client_app(parts), FlowerSettings(num_clients=K), tap=tap)
    return out, tap


def _rows(frame):
    return frame[SAME].sort_values("receiver").reset_index(drop=True)


def test_partition_file_holds_exactly_its_client(fg, parts):
    for c in fg.clients:
        got, meta = load_partition(parts, c.index)
        for name in ("global_ids", "edge_index", "x", "y", "train_mask", "val_mask", "test_mask"):
            a, b = getattr(got, name), getattr(c, name)
            assert a.dtype == b.dtype and torch.equal(a, b), name
        assert meta["num_classes"] == fg.num_classes and meta["num_clients"] == K
    path = client_file(parts, 0)
    data = path.read_bytes()
    try:
        path.write_bytes(data[:-9] + bytes(9))
        with pytest.raises(DataCorruptionError, match="checksum"):
            load_partition(parts, 0)
    finally:
        path.write_bytes(data)


def test_pace_rows_identical_to_run_protocol(pace_run, reference):
    out, _ = pace_run
    pd.testing.assert_frame_equal(_rows(out.rows), _rows(reference), check_exact=True, check_dtype=False)
    assert out.dropped == [] and json.loads(out.rows.params.iloc[0])["flower"]["participants"] == [0, 1, 2]


def test_interior_alpha_identical_to_run_protocol(fg, parts):
    """A setting where CNLL bisects (α strictly inside (0, 1)): α bit for bit, other hyperparameters travel."""
    from pace_nb.nn.training import TrainConfig

    settings = FlowerSettings(num_clients=K, seed=PAPER_SEEDS[1], epochs=20, params={"ranks": [4]})
    ref = run_protocol(fg, seeds=(settings.seed,), methods=("pace",), train_config=TrainConfig(epochs=20),
                       method_params={"pace": {"ranks": (4,)}}, progress=False)
    out = run_inprocess(make_client_app(parts), settings)
    assert ((ref.alpha > 0) & (ref.alpha < 1)).any()
    pd.testing.assert_frame_equal(_rows(out.rows), _rows(ref), check_exact=True, check_dtype=False)


def test_bytes_on_the_messages_are_the_protocol_bytes(pace_run, fg, local, reference):
    out, tap = pace_run
    w0 = local.init[0]
    ups = [pace.upload(local.model(0, k), w0, c) for k, c in enumerate(fg.clients)]
    downs = pace.server(ups)
    dense = lowrank.dense_model_bytes(w0)
    ref = reference.set_index("receiver")
    for k in range(K):
        assert tap.up[k] == ups[k] and tap.down[k] == downs[k]  # the very bytes, not only their length
        assert len(tap.up[k]) == ref.loc[k, "bytes_up"] and len(tap.down[k]) == ref.loc[k, "bytes_down"]
        assert ref.loc[k, "upload_ratio"] == 100.0 * len(tap.up[k]) / dense
        assert ref.loc[k, "return_ratio"] == 100.0 * len(tap.down[k]) / dense
    assert (out.wire.message_up > out.wire.payload_up).all()  # Flower framing on top of the payload
    assert list(out.wire.payload_up) == [len(u) for u in ups]


def test_spear_uploads_are_the_protocol_bytes_and_need_the_evaluator(fg, parts, evaluator, tmp_path):
    tap = Tap()
    cfg = spear.SpearConfig()
    out = run_inprocess(make_client_app(parts), FlowerSettings(num_clients=K, method="spear"), tap=tap,
                        evaluation=evaluator)
    P, N = spear.client_prototypes(fg, cfg.T, cfg.a)
    for k in range(K):
        assert tap.up[k] == (spear.serialize_upload(P[k], N[k]) if bool((N[k] > 0).any()) else b"")
    assert tap.down == {} and list(out.rows.receiver) == [-1]  # evaluated at the server: nothing returned
    assert out.rows.acc.iloc[0] == 100.0 * spear.run_spear(fg, cfg).acc
    with pytest.raises(ConfigError, match="evaluated on the complete graph"):
        run_inprocess(make_client_app(parts), FlowerSettings(num_clients=K, method="spear"))
    other = export_evaluation(build_federated("demo", "dirichlet", K, 7, beta=1.0), tmp_path / "other")
    with pytest.raises(ConfigError, match="another federation.*scheme 'dirichlet' \\(evaluator\\) vs 'louvain'.*seed 7"):
        run_inprocess(make_client_app(parts), FlowerSettings(num_clients=K, method="spear"), evaluation=other)


#: The in-process run of each method (``run_protocol`` parameters) and its Flower settings.
METHOD_RUNS = {
    "pace": ({"pace": {"ranks": (6,)}}, {}),
    "spear": ({}, {}),
    "fedcvae": ({"fedcvae": {"epochs": 20, "synthetic_nodes": 300}}, {"params": {"epochs": 20, "synthetic_nodes": 300}}),
    "oasis": ({"oasis": {"synth_epochs": 5, "codebook_epochs": 5, "epochs": 3}},
              {"params": {"synth_epochs": 5, "codebook_epochs": 5, "epochs": 3}}),
    "centroid_sbm": ({}, {}),
    # a one-shot method built from the client's Local model
    "fedsd2c": ({"fedsd2c": {"steps": 5, "ae_epochs": 20}}, {"params": {"steps": 5, "ae_epochs": 20}}),
}
ROW_COLUMNS = [c for c in COLUMNS if c not in ("seconds", "params")]


@pytest.mark.parametrize("method", sorted(METHOD_RUNS))
def test_every_oneshot_method_rows_identical_to_run_protocol(method, fg, parts, evaluator):
    """One adapter for every method: a Flower run's rows are the in-process run's, every column
    but the wall time; the method's hyperparameters and the participants are in ``params``."""
    from pace_nb.nn.training import TrainConfig

    method_params, extra = METHOD_RUNS[method]
    settings = FlowerSettings(method=method, num_clients=K, epochs=5, **extra)
    out = run_inprocess(make_client_app(parts), settings, evaluation=evaluator)
    ref = run_protocol(fg, seeds=(settings.seed,), methods=(method,), train_config=TrainConfig(epochs=5),
                       method_params=method_params, progress=False)
    got, want = (f[ROW_COLUMNS].sort_values("receiver").reset_index(drop=True) for f in (out.rows, ref))
    pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=False)
    params = json.loads(out.rows.params.iloc[-1])
    assert params["flower"]["participants"] == [0, 1, 2] and out.dropped == []
    for key, value in method_params.get(method, {}).items():
        if key != "ranks":
            assert params[key] == value


def test_oneshot_dropout_and_bad_method(fg, parts, evaluator):
    """A one-shot client that drops out is reported; the server runs on the others' uploads.
    An unknown method is the registry's error, a multi-round one is refused with the reason."""
    from pace_nb.core.errors import UnknownNameError
    from pace_nb.methods.oneshot import make_oneshot
    from pace_nb.methods.oneshot.base import OneShotContext, client_phase, complete_graph_scores, server_phase
    from pace_nb.nn.training import TrainConfig

    out = run_inprocess(make_client_app(parts, drop_partitions=(1,)), FlowerSettings(method="centroid_sbm",
                        num_clients=K, epochs=5), evaluation=evaluator)
    assert [d["node_id"] for d in out.dropped] == [2] and "dropped out" in out.dropped[0]["reason"]
    assert json.loads(out.rows.params.iloc[0])["flower"]["participants"] == [0, 2]
    m = make_oneshot("centroid_sbm")  # needs no Local model
    ctx = OneShotContext(fg, SEED, TrainConfig(epochs=5), torch.device("cpu"))
    blobs = [client_phase(m, ctx, k, fg.clients[k]) for k in (0, 2)]
    theta, _ = server_phase(m, ctx, list(zip((0, 2), blobs, strict=True)))
    assert out.rows.acc.iloc[0] == 100 * complete_graph_scores(fg, theta)["acc"]
    assert out.rows.bytes_up.iloc[0] == sum(map(len, blobs))
    with pytest.raises(UnknownNameError, match="unknown method 'nosuch'"):
        FlowerSettings(method="nosuch", num_clients=K)
    with pytest.raises(ConfigError, match="'fedavg' cannot run on Flower: it is a multi-round"):
        FlowerSettings(method="fedavg", num_clients=K)
    with pytest.raises(ConfigError, match="unknown parameter"):
        FlowerSettings(method="fedcvae", num_clients=K, params={"latnet": 3})


def test_dropout_before_upload_proceeds_with_the_rest(fg, parts, local):
    tap = Tap()
    out = run_inprocess(make_client_app(parts, drop_partitions=(1,)), FlowerSettings(num_clients=K), tap=tap)
    assert set(out.rows.receiver) == {0, 2, -1}
    assert len(out.dropped) == 1 and "dropped out" in out.dropped[0]["reason"]
    flower = json.loads(out.rows.params.iloc[0])["flower"]
    assert flower["participants"] == [0, 2] and len(flower["dropped"]) == 1
    # the server ran RegMean over the two uploads it got
    ups = [pace.upload(local.model(0, k), local.init[0], fg.clients[k]) for k in (0, 2)]
    assert [tap.down[0], tap.down[2]] == pace.server(ups)
    silent = run_inprocess(make_client_app(parts), FlowerSettings(num_clients=K, timeout=1.0), silent=(0,))
    assert set(silent.rows.receiver) == {1, 2, -1} and "no reply" in silent.dropped[0]["reason"]


def _corrupting_app(parts, mutate):
    """The real ClientApp whose partition-0 upload reply is altered by ``mutate(content)``."""
    real = make_client_app(parts)

    def app(message, context):
        reply = real(message, context)
        if int(context.node_config["partition-id"]) == 0 and message.metadata.message_type == wire.UPLOAD:
            mutate(reply.content)
        return reply
    return app


@pytest.mark.parametrize("mutate, match", [
    (lambda c: c.__setitem__(wire.PAYLOAD, flwr.app.ConfigRecord({wire.BLOB: b"not a PACE message"})), "bad magic"),
    (lambda c: c.__setitem__(wire.PAYLOAD, flwr.app.ConfigRecord({wire.BLOB: wire.blob(c[wire.PAYLOAD])[:-4]})),
     "its header describes"),  # refused from the header's size, before any tensor is decoded
    (lambda c: c.__setitem__(wire.PAYLOAD, flwr.app.ConfigRecord({"other": 1})), "not bytes"),
])
def test_malformed_upload_excludes_that_client_and_names_it(parts, tmp_path, mutate, match):
    out = tmp_path / "outcome.json"
    run_inprocess(_corrupting_app(parts, mutate), FlowerSettings(num_clients=K),
                  run_config={"num-clients": K, "out": str(out)})
    doc = json.loads(out.read_text())
    assert {r["receiver"] for r in doc["rows"]} == {1, 2, -1}
    (bad,) = doc["dropped"]
    assert bad["kind"] == "invalid" and bad["node_id"] == 1 and match in bad["reason"]


def test_malformed_report_excludes_that_client(parts):
    real = make_client_app(parts)

    def app(message, context):
        reply = real(message, context)
        if message.metadata.message_type == wire.RECEIVE and context.node_config["partition-id"] == 1:
            reply.content[wire.REPORT]["confusion_final"] = [1, 2, 3]
        return reply
    out = run_inprocess(app, FlowerSettings(num_clients=K))
    assert set(out.rows.receiver) == {0, 2, -1}
    assert "confusion_final" in out.dropped[0]["reason"] and "client 1" in out.dropped[0]["reason"]


_SERVER_ONLY = textwrap.dedent("""
    import base64, gc, json, sys
    import pace_nb.data.datasets as ds
    def _no_data(*a, **k):
        raise AssertionError("the server tried to load a dataset")
    ds.load_dataset = _no_data
    from flwr.app import Message
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
    from pace_nb.flower.inprocess import ship
    from pace_nb.flower.server import run_round
    from pace_nb.flower.settings import FlowerSettings
    rec = json.load(open(sys.argv[1]))
    replies = {}
    for r in rec["replies"]:
        contents = {k: base64.b64decode(v) for k, v in r["contents"].items()}
        replies[(r["type"], r["node"])] = inflate_object_from_contents(r["id"], contents).content

    class ReplayGrid:
        def get_node_ids(self):
            return sorted({n for _, n in replies})
        def send_and_receive(self, messages, *, timeout=None):
            out = []
            for m in messages:
                m.metadata.__dict__["_message_id"] = m.object_id
                m = ship(m)
                out.append(ship(Message(replies[(m.metadata.message_type, m.metadata.dst_node_id)], reply_to=m)))
            return out

    from flwr.supercore.task_identity import TaskIdentity
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    outcome = run_round(ReplayGrid(), FlowerSettings(num_clients=len(rec["nodes"])))
    gc.collect()
    import torch
    from pace_nb.data.federation import ClientGraph, FederatedGraph
    held = [type(o).__name__ for o in gc.get_objects() if isinstance(o, (ClientGraph, FederatedGraph))]
    held += [type(o).__name__ for o in gc.get_objects() if type(o).__name__ == "Data"]
    shapes = {tuple(s) for s in rec["private_shapes"]}
    private = [tuple(t.shape) for t in gc.get_objects() if isinstance(t, torch.Tensor) and tuple(t.shape) in shapes]
    print(json.dumps({"rows": outcome.rows.to_dict("records"), "held": held, "private": private,
                      "modules": [m for m in ("pace_nb.flower.partitions", "pace_nb.flower.client") if m in sys.modules]}))
""")


def test_server_process_holds_no_client_data(fg, pace_run, tmp_path):
    """The server side alone, in a fresh process without any data root, replaying the clients'
    recorded replies: same rows; no graph, partition, features, labels or edges in its heap."""
    out, tap = pace_run
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    rec = {"nodes": sorted({int(m.metadata.src_node_id) for m in tap.replies}), "replies": [
        {"type": m.metadata.message_type, "node": int(m.metadata.src_node_id), "id": m.object_id,
         "contents": {k: base64.b64encode(o.deflate()).decode() for k, o in get_all_nested_objects(m).items()}}
        for m in tap.replies],
        "private_shapes": sorted({tuple(getattr(c, n).shape) for c in fg.clients
                                  for n in ("x", "y", "edge_index", "train_mask")})}
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(rec))
    empty = tmp_path / "no_data"
    empty.mkdir()
    env = {**os.environ, "PACE_NB_DATA": str(empty), "PACE_NB_CACHE": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", _SERVER_ONLY, str(path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["held"] == [] and got["private"] == [] and got["modules"] == []
    assert not any(empty.iterdir()) and not (tmp_path / "cache").exists()
    pd.testing.assert_frame_equal(_rows(pd.DataFrame(got["rows"])), _rows(out.rows), check_exact=True)


def test_simulation_engine_end_to_end(fg, reference):
    """One true run on Flower's simulation engine (Ray): the same rows as ``run_protocol``."""
    pytest.importorskip("ray")
    from pace_nb.flower.simulate import simulate

    from pace_nb.core.errors import RuntimeStartError

    try:
        out = simulate(fg, FlowerSettings(num_clients=K), num_cpus=1)  # one Ray worker: one start-up
    except RuntimeStartError as exc:  # a machine too loaded for Ray's fixed start-up wait: not a code failure
        pytest.skip(str(exc))
    pd.testing.assert_frame_equal(_rows(out.rows), _rows(reference), check_exact=True, check_dtype=False)
    assert out.timings["startup"] >= 0 and out.timings["runtime"] == "simulation"


def test_a_ray_start_up_timeout_is_one_line_naming_the_load():
    """Flower's engine wraps Ray's start-up failure in its own RuntimeError: the cause is found and
    named with the machine's load; any other crash is left as it is."""
    from pace_nb.flower.simulate import _start_error

    try:
        try:
            raise Exception("The current node timed out during startup. This could happen because ...")
        except Exception as inner:
            raise RuntimeError("Simulation Runtime crashed.") from inner
    except RuntimeError as exc:
        err = _start_error(exc)
    assert err is not None and "the Ray runtime did not start (The current node timed out" in str(err)
    assert "load average" in str(err) or "overloaded" in str(err)
    assert _start_error(RuntimeError("Simulation Runtime crashed.")) is None


def test_cli_simulate_inprocess_and_bad_input(tmp_path, capsys):
    from pace_nb.cli import main

    out = tmp_path / "flower.json"
    assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), "--epochs", "5",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {r["receiver"] for r in doc["rows"]} == {0, 1, 2, -1} and len(doc["wire"]) == K
    assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), "--rank", "-1"]) == 2
    assert "pace-nb: error:" in capsys.readouterr().err
    one = tmp_path / "fedcvae.json"
    assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), "--epochs", "5", "--method",
                 "FedCVAE", "--param", "fedcvae.epochs=5", "--param", "fedcvae.synthetic_nodes=100", "--compare",
                 "--json", str(one)]) == 0
    doc = json.loads(one.read_text())
    (row,), (ref,) = doc["rows"], doc["reference"]["rows"]
    assert row["method"] == "fedcvae" and row["partition"] == "dirichlet"
    assert {k: row[k] for k in ROW_COLUMNS} == {k: ref[k] for k in ROW_COLUMNS}
    assert json.loads(row["params"])["synthetic_nodes"] == 100
    capsys.readouterr()
    for argv, message in ((["--method", "nosuch"], "pace-nb: error: unknown method 'nosuch'; valid methods: "),
                          (["--method", "fedprox"], "'fedprox' cannot run on Flower: it is a multi-round"),
                          (["--method", "oasis", "--param", "oasis.bogus=1"], "unknown parameter(s) ['bogus']")):
        assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    # --drop: a simulated drop-out; the server runs on the others' uploads and the run says so
    dropped = tmp_path / "dropped.json"
    assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), "--method", "centroid_sbm",
                 "--drop", "1", "--json", str(dropped)]) == 0
    assert "participants 2/3; dropped 1: node " in capsys.readouterr().out
    assert json.loads(json.loads(dropped.read_text())["rows"][0]["params"])["flower"]["participants"] == [0, 2]
    for argv, message in ((["--drop", "7"], "outside 0..2"), (["--drop", "0,1,2"], "leave at least one"),
                          (["--drop", "x"], "comma-separated client ids")):
        assert main(["flower", "simulate", "--engine", "inprocess", "--clients", str(K), "--method", "centroid_sbm",
                     *argv]) == 2
        assert message in capsys.readouterr().err


def test_deployment_app_project_names_importable_components(tmp_path):
    import importlib
    import tomllib

    from pace_nb.flower.deploy import write_app

    settings = FlowerSettings(num_clients=K, params={"ranks": [4], "variants": ["transport"]})
    app = write_app(tmp_path / "app", settings, tmp_path / "outcome.json")
    conf = tomllib.loads((app / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    for ref in conf["components"].values():
        module, attr = ref.split(":")
        assert getattr(importlib.import_module(module), attr) is not None
    run_config = dict(conf["config"])
    assert run_config.pop("out") == str(tmp_path / "outcome.json")
    assert FlowerSettings.from_mapping(run_config) == settings


def test_deploy_workdir_never_deletes_what_it_did_not_create(tmp_path, capsys):
    from pace_nb.cli import main
    from pace_nb.flower.deploy import clean_workdir, prepare_workdir

    user = tmp_path / "mine"
    user.mkdir()
    (user / "thesis.tex").write_text("precious")
    for action in ("deploy", "export"):
        assert main(["flower", action, "--clients", str(K), "--workdir", str(user)]) == 2
        assert "not empty" in capsys.readouterr().err
    assert (user / "thesis.tex").read_text() == "precious"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["flower", "deploy", "--workdir", str(a_file)]) == 2 and a_file.read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    root, created = prepare_workdir(empty)
    assert not created
    (root / "logs").mkdir()
    (root / "outcome.json").write_text("{}")
    clean_workdir(root, created)
    assert empty.is_dir() and not any(empty.iterdir())  # the user's empty folder stays
    new = tmp_path / "new" / "deep"
    root, created = prepare_workdir(new)
    assert created and new.is_dir()
    clean_workdir(root, created)
    assert not new.exists() and (tmp_path / "new").is_dir()


@pytest.mark.slow
def test_secured_deployment_equals_inprocess_and_refuses_intruders(fg, parts, tmp_path, monkeypatch):
    """TLS + SuperNode authentication on loopback: the rows equal the in-process grid's; a
    SuperNode with an unregistered key and one trusting another CA are refused (their log lines);
    the given empty workdir is left empty."""
    import shutil

    if shutil.which("flower-superlink") is None:
        pytest.skip("Flower's executables are not on PATH")
    from pace_nb.flower.deploy import deploy

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the processes' torch threads = this test's (one_thread)
    settings = FlowerSettings(num_clients=K, epochs=5)
    empty = tmp_path / "empty"
    empty.mkdir()
    out = deploy(fg, settings, workdir=empty, timeout=600, probe=True)
    ref = run_inprocess(make_client_app(parts), settings)
    pd.testing.assert_frame_equal(_rows(out.rows), _rows(ref.rows), check_exact=True)
    probe = out.timings["probe"]
    assert out.timings["security"] == "tls+supernode-auth" and out.dropped == []
    assert "Failed to activate SuperNode" in probe["unregistered"]
    assert "No SuperNode found with the given public key" in probe["superlink"]
    assert "CERTIFICATE_VERIFY_FAILED" in probe["tampered_ca"]
    assert empty.is_dir() and not any(empty.iterdir())


def test_demo_credentials_are_what_flower_reads(tmp_path):
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key

    from pace_nb.flower.security import make_credentials

    creds = make_credentials(tmp_path / "c", 2)
    ca = x509.load_pem_x509_certificate(creds.ca.read_bytes())
    cert = x509.load_pem_x509_certificate(creds.server_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    other = make_credentials(tmp_path / "other", 1)
    with pytest.raises((ValueError, InvalidSignature)):  # a certificate from another CA does not verify
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(other.ca.read_bytes()))
    for private, public in creds.node_keys:
        assert oct(private.stat().st_mode & 0o777) == "0o600"
        key = load_ssh_public_key(public.read_bytes())
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp384r1"
        assert load_ssh_private_key(private.read_bytes(), None).public_key().public_numbers() == key.public_numbers()
    assert oct(creds.server_key.stat().st_mode & 0o777) == "0o600"


def test_insecure_deploy_warns(monkeypatch, capsys):
    from pace_nb.cli import main
    from pace_nb.core.errors import ConfigError
    from pace_nb.flower import deploy as dep

    def stop(*a, **kw):
        assert kw["insecure"] is True
        raise ConfigError("stopped before starting processes")
    monkeypatch.setattr(dep, "deploy", stop)
    assert main(["flower", "deploy", "--clients", str(K), "--insecure"]) == 2
    err = capsys.readouterr().err
    assert "warning: --insecure: no TLS and no SuperNode authentication" in err


_NEW_METHOD = class_means_module("ClassMeans", "classmeans_probe")

_RUN_NEW_METHOD = textwrap.dedent("""
    import json, tempfile
    import classmeans_probe  # registers the method: no other file names it
    from pace_nb.core.schema import COLUMNS
    from pace_nb.data.federation import build_federated
    from pace_nb.flower.client import make_client_app
    from pace_nb.flower.inprocess import run_inprocess
    from pace_nb.flower.partitions import export_evaluation, export_partitions
    from pace_nb.flower.settings import FlowerSettings
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.nn.training import TrainConfig
    fg = build_federated("demo", "dirichlet", 3, 2024, beta=1.0)
    tmp = tempfile.mkdtemp()
    s = FlowerSettings(method="classmeans_probe", num_clients=3, epochs=5, params={"knn": 3})
    out = run_inprocess(make_client_app(str(export_partitions(fg, tmp + "/p"))), s,
                        evaluation=export_evaluation(fg, tmp + "/e"))
    ref = run_protocol(fg, seeds=(s.seed,), methods=("classmeans_probe",), train_config=TrainConfig(epochs=5),
                       method_params={"classmeans_probe": {"knn": 3}}, progress=False)
    cols = [c for c in COLUMNS if c not in ("seconds", "params")]
    print(json.dumps({"flower": out.rows[cols].to_dict("records"), "inprocess": ref[cols].to_dict("records"),
                      "knn": json.loads(out.rows.params.iloc[0])["knn"]}))
""")


def test_a_new_method_in_one_module_runs_on_flower(tmp_path):
    """A one-shot method defined in one new module (in a fresh process, so the registry of this
    one stays as it is) runs on Flower with the in-process rows — no adapter, no other file."""
    (tmp_path / "classmeans_probe.py").write_text(_NEW_METHOD)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PACE_NB_PROGRESS": "0",
           "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)}
    res = subprocess.run([sys.executable, "-c", _RUN_NEW_METHOD], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["flower"] == got["inprocess"] and len(got["flower"]) == 1 and got["knn"] == 3
    assert got["flower"][0]["method"] == "classmeans_probe" and got["flower"][0]["acc"] > 0


def test_flower_settings_hold_no_method_hyperparameter_of_their_own():
    """The method's hyperparameters are its own Config's (``params``, the in-process names): the
    Flower settings have no PACE or SPEAR field, and the defaults are the method's."""
    from dataclasses import fields

    from pace_nb.flower.adapters import make_adapter
    from pace_nb.methods.pace.protocol import PaceConfig
    from pace_nb.methods.spear.core import SpearConfig
    from pace_nb.nn.training import TrainConfig

    s = FlowerSettings()
    assert s.train_config == TrainConfig() and s.method_params == {}
    assert not {f.name for f in fields(FlowerSettings)} & {"rank", "variant", "spear_variant", "T", "a", "gamma"}
    assert make_adapter(s).method.pace_config == PaceConfig()
    spear_method = make_adapter(FlowerSettings(method="spear", params={"T": 3, "variants": ["no_ppr"]})).method
    assert spear_method.spear_config() == SpearConfig(T=3) and spear_method.variant == "no_ppr"
    with pytest.raises(ConfigError, match="unknown Flower run setting 'rank': 'ranks' is a hyperparameter of method "
                                          "'pace'; give it in the params setting"):
        FlowerSettings.from_mapping({"rank": 4})
    with pytest.raises(ConfigError, match="'gen_steps' is a hyperparameter of method 'ghost'"):
        FlowerSettings.from_mapping({"method": "ghost", "gen-steps": 3})
    with pytest.raises(ConfigError, match=r"unknown Flower run setting 'colour'; valid: device"):
        FlowerSettings.from_mapping({"colour": 1})


@pytest.mark.parametrize("method,params,name", [("pace", {"ranks": [2, 6]}, "ranks"),
                                                ("pace", {"variants": ["full", "mean"]}, "variants"),
                                                ("spear", {"variants": ["full", "no_ppr"]}, "variants")])
def test_a_flower_round_is_one_configuration(method, params, name):
    with pytest.raises(ConfigError, match=f"one round runs one configuration: parameter '{name}' must hold exactly "
                                          "one value") as exc:
        FlowerSettings(method=method, params=params)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("action", ["simulate", "deploy", "export"])
@pytest.mark.parametrize("rank,msg", [(str(10**23), "parameter 'ranks' must be an int in [0, 2147483647]"),
                                      ("65", "rank 65 is impossible")])
def test_cli_impossible_rank_is_one_line_before_any_run(action, rank, msg, tmp_path, capsys, monkeypatch):
    import pace_nb.flower.partitions as partitions
    from pace_nb.cli import main

    monkeypatch.setattr(partitions, "export_partitions", lambda *a, **k: pytest.fail("ran before the rank check"))
    assert main(["flower", action, "--engine", "inprocess", "--clients", str(K), "--rank", rank,
                 "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pace-nb: error:") and err.count("\n") == 1 and msg in err


def test_flower_ranks_are_paces_ranks_field(tmp_path, capsys):
    """One spelling: ``ranks`` as on the method, checked by PACE's own Config; ``--rank`` writes it,
    ``--param pace.ranks`` is refused (one way to set it), and ``--rank`` on a method without ranks too."""
    from pace_nb.cli import main

    with pytest.raises(ConfigError, match="'ranks' must be an int"):
        FlowerSettings(params={"ranks": [10**23]})
    for argv, msg in ((["--param", "pace.ranks=[2]"], "give pace's ranks with --rank"),
                      (["--method", "spear", "--rank", "2"], "--rank sets a method's ranks; spear takes none")):
        assert main(["flower", "export", "--clients", str(K), "--workdir", str(tmp_path / "w"), *argv]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err
    assert main(["flower", "export", "--clients", str(K), "--rank", "0", "--variant", "mean",
                 "--workdir", str(tmp_path / "x")]) == 0
    run_config = (tmp_path / "x" / "app" / "pyproject.toml").read_text()
    assert '"ranks": [0]' in run_config.replace('\\"', '"') and '"variants": ["mean"]' in run_config.replace('\\"', '"')


def test_any_one_round_method_runs_on_the_one_adapter(fg, parts):
    """A method implementing only the round hooks — no PACE, SPEAR or one-shot base class, evaluated
    at its receivers — runs on Flower through the one adapter with its in-process rows."""
    from dataclasses import dataclass

    from pace_nb.core.validation import Interval, param
    from pace_nb.flower.adapters import flower_methods
    from pace_nb.methods.contract import OneRoundMethod, register
    from pace_nb.methods.evaluation import evaluate_method
    from pace_nb.methods.phases import PublicView, Receipt, Round, ServerResult, Upload, UploadSpec
    from pace_nb.methods.registry import METHODS
    from pace_nb.nn.training import TrainConfig, client_logits

    def encode(params):
        return lowrank.serialize(lowrank.dense_carriers(params))

    def decode(data):
        return lowrank.reconstruct(lowrank.deserialize(data))

    class MeanModel(OneRoundMethod):
        """Each client uploads its Local model; every receiver gets their mean back and blends."""

        name, label, paper, evaluation = "meanmodel_probe", "MeanModel", "a test method", "receivers"

        @dataclass(frozen=True)
        class Config:
            shrink: float = param(1.0, Interval(float, 0.0, 1.0))

        def client_upload(self, rnd, client, local=None):
            return Upload(encode(local), encode(local))

        def upload_spec(self, config, view, client):
            return UploadSpec("carriers", bounds=1e6)

        def server_aggregate(self, rnd, uploads, failures=()):
            models = [decode(b) for _, b in uploads]
            mean = {n: self.cfg.shrink * torch.stack([m[n] for m in models]).mean(0) for n in models[0]}
            return ServerResult(returns={k: encode(mean) for k, _ in uploads})

        def receiver_logits(self, rnd, client, kept, returned):
            return Receipt(client_logits(decode(kept), client), client_logits(decode(returned), client), "cnll")

        def receiver_fields(self, rnd):
            return {"variant": "native", "rank": 0, "dense_bytes": lowrank.dense_model_bytes(rnd.initial()),
                    "params": {"shrink": self.cfg.shrink}}

        def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
            rows = []
            for s, seed in enumerate(local.seeds):
                rnd = Round(PublicView.of(fg), seed, local.config, "cpu", w0=local.init[s])
                ups = [self.client_upload(rnd, c, local.model(s, k)) for k, c in enumerate(fg.clients)]
                back = self.server_aggregate(rnd, [(k, u.data) for k, u in enumerate(ups)]).returns
                got = [self.receiver_logits(rnd, c, ups[k].kept, back[k]) for k, c in enumerate(fg.clients)]
                rows += evaluate_method(fg, [g.local for g in got], [g.external for g in got], "cnll", seed=seed,
                                        method=self.name, bytes_up=[len(u.data) for u in ups],
                                        bytes_down=[len(back[k]) for k in range(len(ups))], **self.receiver_fields(rnd))
            return rows

    register(MeanModel)
    try:
        assert "meanmodel_probe" in flower_methods()
        settings = FlowerSettings(method="meanmodel_probe", num_clients=K, epochs=5, params={"shrink": 0.5})
        out = run_inprocess(make_client_app(parts), settings)
        ref = run_protocol(fg, seeds=(SEED,), methods=("meanmodel_probe",), train_config=TrainConfig(epochs=5),
                           method_params={"meanmodel_probe": {"shrink": 0.5}}, progress=False)
        assert set(out.rows.receiver) == {0, 1, 2, -1} and out.dropped == []
        pd.testing.assert_frame_equal(_rows(out.rows), _rows(ref), check_exact=True, check_dtype=False)
    finally:
        METHODS._entries.pop("meanmodel_probe", None)
        METHODS._lookup.pop("meanmodel_probe", None)
