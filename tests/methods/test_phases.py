"""One contract for every method (issue 40): where a method's rows are scored is a class attribute
(``Method.evaluation``), checked against its rows and shown in every summary."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from pace_nb.cli import main
from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import EVALUATIONS
from pace_nb.methods.contract import Method, register
from pace_nb.methods.registry import METHODS, registered
from pace_nb.nn.training import TrainConfig


def _unregister(name: str) -> None:
    METHODS._entries.pop(name, None)
    METHODS._lookup.pop(name, None)


def test_every_method_declares_where_its_rows_are_scored():
    for entry in registered().entries():
        assert entry.obj.evaluation in EVALUATIONS, entry.name
        assert entry.meta["evaluation"] == entry.obj.evaluation, entry.name
    assert {n: registered().get(n).obj.evaluation for n in ("local", "pace", "fedavg", "spear", "fedcvae")} == {
        "local": "receivers", "pace": "receivers", "fedavg": "receivers", "spear": "complete_graph",
        "fedcvae": "complete_graph"}


def test_a_method_without_an_evaluation_is_refused_at_registration():
    class Nowhere(Method):
        name, label, paper = "nowhere_probe", "Nowhere", "a test method"

    with pytest.raises(TypeError, match="evaluation must be one of receivers, complete_graph"):
        register(Nowhere)
    assert "nowhere_probe" not in METHODS


def test_rows_scored_elsewhere_than_declared_are_refused():
    from pace_nb.methods.evaluation import evaluate_method
    from pace_nb.methods.protocol import run_protocol

    @register
    class Misdeclared(Method):
        """Receiver rows under a complete-graph declaration."""

        name, label, paper = "misdeclared_probe", "Misdeclared", "a test method"
        evaluation = "complete_graph"

        def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
            return pd.DataFrame(evaluate_method(fg, local_logits[0], seed=local.seeds[0], method=self.name))

    try:
        with pytest.raises(ConfigError, match="declares evaluation 'complete_graph', but its rows say 'receivers'"):
            run_protocol("demo", num_clients=3, seeds=(1,), methods=["misdeclared_probe"], device="cpu",
                         progress=False, train_config=TrainConfig(epochs=1))
    finally:
        _unregister("misdeclared_probe")


def test_run_prints_each_evaluation_under_its_own_heading(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["run", "--clients", "3", "--seeds", "104729", "--methods", "spear,local", "--device", "cpu",
                 "--no-progress", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pooled test nodes" not in text
    graph, receivers = text.index("scored by the server's global model on the complete graph"), \
        text.index("scored by each receiver's model on its own test nodes")
    assert graph < text.index("spear") < receivers < text.index(" local ")  # in the order the methods ran
    import json

    summary = {s["method"]: s["evaluation"] for s in json.loads(out.read_text())["summary"]}
    assert summary == {"spear": "complete_graph", "local": "receivers"}


# ----------------------------------------------------------------------------- the server's view
class _Peek:
    """Client phase: class counts; server phase: whatever ``peek`` reads (a hook that reads the data)."""

    @staticmethod
    def make(peek):
        from pace_nb.methods.oneshot import base

        class Peek(base.OneShotMethod):
            name = "peek_probe"

            def client_message(self, ctx, k, client):
                return {"counts": base.label_counts(client, ctx.num_classes)}

            def synthesize(self, ctx, messages):
                read = peek(ctx)
                self.seen = (getattr(ctx, "senders", None), getattr(ctx, "failures", None), len(messages), read)
                return base.SyntheticGraph(torch.zeros(1, ctx.num_features), torch.zeros(1, dtype=torch.long),
                                           torch.empty(2, 0, dtype=torch.long))

        return Peek()


@pytest.fixture(scope="module")
def fg3():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="louvain", num_clients=3, seed=2024)


def test_a_server_hook_that_reads_the_data_fails_in_process_too(fg3):
    """In process the server hooks get the federation's public view, as on Flower: no ``fg``."""
    from pace_nb.methods.oneshot.base import run_oneshot

    with pytest.raises(AttributeError, match="fg"):
        run_oneshot(fg3, _Peek.make(lambda ctx: ctx.fg.data.x.sum()), (0,), config=TrainConfig(epochs=1),
                    progress=False)
    from pace_nb.methods.phases import PublicView

    probe = _Peek.make(lambda ctx: ctx.view)
    run_oneshot(fg3, probe, (0,), config=TrainConfig(epochs=1), progress=False)
    assert probe.seen[3] == PublicView(fg3.num_features, fg3.num_classes, 3, tuple(c.num_nodes for c in fg3.clients),
                                       tuple(int(c.test_mask.sum()) for c in fg3.clients))
    assert not hasattr(probe.seen[3], "data") and not hasattr(probe.seen[3], "clients")


def test_the_server_phase_gets_client_message_pairs_and_the_failures(fg3):
    """Who sent each message, who dropped or was excluded, and who sent an empty upload."""
    from pace_nb.methods.oneshot.base import OneShotContext, client_phase, server_phase
    from pace_nb.methods.phases import EMPTY, Failure

    probe = _Peek.make(lambda ctx: None)
    ctx = OneShotContext(fg3, 0, TrainConfig(epochs=1), torch.device("cpu"))
    blobs = {k: client_phase(probe, ctx, k, fg3.clients[k]) for k in (0, 2)}
    server_phase(probe, ctx, [(2, blobs[2]), (0, blobs[0]), (3, b"")], [Failure(1, "dropped out")])
    assert probe.seen[:3] == ((0, 2), (Failure(1, "dropped out"), Failure(3, EMPTY)), 2)


def test_pace_spear_and_every_one_shot_method_implement_the_round_hooks():
    """The round hooks are declared on the contract and implemented by PACE (receivers), SPEAR
    (complete graph) and every one-shot method; the multi-round methods and Local have none."""
    from pace_nb.methods.contract import OneRoundMethod
    from pace_nb.methods.oneshot.base import OneShotMethod

    reg = registered()
    one_round = {e.name for e in reg.entries() if issubclass(e.obj, OneRoundMethod)}
    assert {"pace", "spear"} <= one_round and not {"local", "fedavg", "fedprox"} & one_round
    assert {e.name for e in reg.entries() if issubclass(e.obj, OneShotMethod)} <= one_round
    for name in sorted(one_round):
        cls = reg[name]
        hooks = ("client_upload", "upload_spec", "server_aggregate") + (
            ("receiver_logits", "receiver_fields") if cls.evaluation == "receivers" else ("graph_rows",))
        assert all(getattr(cls, h) is not getattr(OneRoundMethod, h) for h in hooks), name


def test_spear_run_drives_its_hooks_with_the_ablation_rows(fg3):
    """SPEAR's in-process run is one round of its hooks per variant: each client's upload is the
    bytes of its prototypes, and the rows are bit for bit those of the ablation."""
    from pace_nb.methods.phases import PublicView, Round
    from pace_nb.methods.spear import analysis as sa, core as sp
    from pace_nb.methods.spear.method import Spear

    variants = tuple(sp.VARIANTS)
    got = Spear(variants=variants, T=3, gamma=0.5).run(fg3)
    want = sa.ablation(fg3, sp.SpearConfig(T=3, gamma=0.5), variants)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    P, N = sp.client_prototypes(fg3, 3, 0.5)
    rnd = Round(PublicView.of(fg3), -1, TrainConfig())
    one = Spear(T=3, variants=("full",))
    assert [one.client_upload(rnd, c).data for c in fg3.clients] == [sp.serialize_upload(P[k], N[k])
                                                                     for k in range(3)]


def test_a_round_is_one_configuration_in_process_runs_them_all():
    from pace_nb.methods.pace.protocol import Pace

    Pace(ranks=(2, 6), variants=("full", "mean"))  # the in-process run takes several
    with pytest.raises(ConfigError, match="parameter 'ranks' must hold exactly one value, got \\[2, 6\\]"):
        Pace(ranks=(2, 6)).check_round()
    assert Pace(ranks=(0,), variants=("mean",)).round_variant()[0] == "mean"
