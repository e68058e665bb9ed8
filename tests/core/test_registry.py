"""The one registry mechanism: methods, datasets and tables are registered by decorator."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from pace_nb.core.errors import ConfigError, UnknownNameError
from pace_nb.core.registry import Registry
from pace_nb.core.schema import COLUMNS


def test_registry_lookup_aliases_and_errors():
    reg = Registry("widget")

    @reg.register("Alpha", aliases=("a1",), colour="red")
    def alpha():
        return 1

    assert reg["alpha"] is alpha and reg["A1"] is alpha and "ALPHA" in reg
    assert reg.get("a1").name == "Alpha" and reg.get("alpha").meta == {"colour": "red"}
    assert reg.names() == ["Alpha"] and len(reg) == 1
    with pytest.raises(UnknownNameError, match="valid widgets: Alpha"):
        reg.get("beta")
    with pytest.raises(ConfigError, match="already registered"):
        reg.register("Beta", object(), aliases=("alpha",))
    reg.register("Alpha", 2)  # re-registering replaces (and drops the old aliases)
    assert reg["alpha"] == 2 and "a1" not in reg


def test_registry_defers_work_to_its_first_read_and_keeps_order_on_replace():
    reg = Registry("widget")
    calls = []
    reg.defer(lambda: calls.append(len(reg)))  # a read from inside the deferred work does not recurse
    reg.register("a", 1)
    reg.register("b", 2)
    assert calls == []  # registering does not run it
    assert reg.registered_now("B").obj == 2 and reg.registered_now("c") is None and calls == []
    assert reg.names() == ["a", "b"] and calls == [2]
    assert "a" in reg and calls == [2]  # once
    reg.register("a", 3)
    assert reg.names() == ["a", "b"] and reg["a"] == 3  # replaced in place
    reg.register("c", 4, aliases=("see",))
    reg.remove("SEE")
    assert "c" not in reg and "see" not in reg and reg.names() == ["a", "b"]


def test_every_registered_method_honours_the_contract():
    from pace_nb.methods.protocol import get_method
    from pace_nb.methods.registry import METHODS

    assert {"local", "pace", "fedavg"} <= set(METHODS.names())
    for name in METHODS.names():
        spec = get_method(name)
        assert callable(spec.fn) and spec.description, name
        assert set(spec.needs) <= {"local"}


def test_a_method_registered_by_decorator_runs_in_the_protocol():
    from pace_nb.methods.contract import Method, register
    from pace_nb.methods.evaluation import evaluate_method
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.methods.registry import METHODS, register_method
    from pace_nb.nn.training import TrainConfig, client_logits

    @register
    class UniformProbe(Method):
        """Every receiver gets client 0's Local model."""

        name, label, paper = "uniform_probe", "UniformProbe", "a test method"
        evaluation = "receivers"

        def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
            rows = []
            for s, seed in enumerate(local.seeds):
                z = [client_logits(local.model(s, 0), c, device=device) for c in fg.clients]
                rows += evaluate_method(fg, z, seed=seed, method="uniform_probe", variant="native", rank=0)
            return pd.DataFrame(rows)

    try:
        rows = run_protocol("demo", num_clients=3, seeds=(1,), methods=["local", "uniform_probe"], device="cpu",
                            progress=False, train_config=TrainConfig(epochs=3))
        assert list(rows.columns[: len(COLUMNS)]) == list(COLUMNS)
        pooled = rows[rows.receiver == -1].set_index("method")["acc"]
        assert set(pooled.index) == {"local", "uniform_probe"}
        own = rows[(rows.method == "local") & (rows.receiver == 0)]["acc"].item()
        probe = rows[(rows.method == "uniform_probe") & (rows.receiver == 0)]["acc"].item()
        assert own == probe  # client 0 evaluates its own model either way
        with pytest.raises(ConfigError, match="unknown parameter"):  # it has no hyperparameters
            run_protocol("demo", num_clients=3, seeds=(1,), methods=["uniform_probe"], device="cpu", progress=False,
                         method_params={"uniform_probe": {"k": 1}}, train_config=TrainConfig(epochs=1))
    finally:
        METHODS._entries.pop("uniform_probe")
        METHODS._lookup.pop("uniform_probe")
    # one contract: a bare function is refused, with what to do instead
    with pytest.raises(ConfigError, match="Method subclass"):
        register_method("fn_probe", lambda fg, local, **_: None)
    with pytest.raises(TypeError, match="Method subclass"):
        register(object)


def test_run_protocol_reuses_given_local_models():
    from pace_nb.data.federation import build_federated
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.nn.training import TrainConfig, train_local

    fg = build_federated("demo", "louvain", 3)
    cfg = TrainConfig(epochs=3)
    local = train_local(fg, (5,), cfg, device="cpu", progress=False)
    a = run_protocol(fg, seeds=(5,), local=local, device="cpu", progress=False)
    b = run_protocol(fg, seeds=(5,), train_config=cfg, device="cpu", progress=False)
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
    with pytest.raises(ConfigError, match="seeds"):
        run_protocol(fg, seeds=(6,), local=local, progress=False)


def test_a_dataset_registered_by_decorator_loads_and_partitions(tmp_path):
    from pace_nb.data import datasets as D
    from pace_nb.data.federation import build_federated

    rng = np.random.default_rng(0)
    n = 120
    raw = tmp_path / "Ring" / "raw"
    raw.mkdir(parents=True)
    y = np.arange(n) % 3
    np.savez(raw / "ring.npz", x=rng.random((n, 8)).astype(np.float32) + y[:, None],
             edges=np.stack([np.arange(n), (np.arange(n) + 1) % n]), y=y)

    @D.register_dataset("Ring", files=("ring.npz",))
    def load_ring(raw_dir):
        z = np.load(raw_dir / "ring.npz")
        return Data(x=torch.from_numpy(z["x"]), edge_index=torch.from_numpy(z["edges"]).long(),
                    y=torch.from_numpy(z["y"]))

    try:
        data = D.load_dataset("ring", tmp_path)
        assert data.name == "Ring" and data.num_classes == 3 and data.edge_index.shape[1] == 2 * n
        fg = build_federated("Ring", "metis", 2, data_root=tmp_path)
        assert sum(c.num_nodes for c in fg.clients) == n
        assert D.missing_files("Ring", tmp_path / "elsewhere") == ["ring.npz"]
    finally:
        D.DATASETS._entries.pop("Ring")
        D.DATASETS._lookup.pop("ring")
        D._load_cached.cache_clear()


def test_config_constraints_are_declared_once():
    from pace_nb.core.validation import config_keys
    from pace_nb.experiments.sections import SpearSection
    from pace_nb.methods.baselines import make_method
    from pace_nb.methods.spear.core import SpearConfig
    from pace_nb.nn.training import TrainConfig

    assert config_keys(SpearConfig) <= config_keys(SpearSection)
    for bad in ({"lr": float("nan")}, {"lr": float("inf")}, {"epochs": -1}, {"dropout": 1.0}, {"hidden": 0}):
        with pytest.raises(ConfigError, match=f"TrainConfig: parameter '{next(iter(bad))}'"):
            TrainConfig(**bad)
    with pytest.raises(ConfigError, match="SpearConfig: parameter 'T' must be an int in"):
        SpearConfig(T=10_000)
    with pytest.raises(ConfigError, match="fedgta: parameter 'lp_alpha' must be a float in"):
        make_method("fedgta", lp_alpha=2.0)
    with pytest.raises(ConfigError, match="fedadam: parameter 'weighting' must be one of"):
        make_method("fedadam", weighting="edges")  # inherited from FedAvg's constraints
