"""One contract for every method (issue 40): where a method's rows are scored is a class attribute
(``Method.evaluation``), checked against its rows and shown in every summary."""
from __future__ import annotations

import pandas as pd
import pytest

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
