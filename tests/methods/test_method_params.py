"""Hyperparameters: an unknown name or a mistyped value is a one-line ConfigError naming the valid
ones — from Python (run_protocol, run_method), a TOML grid and the CLI — never silently dropped."""
from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass, field

import pytest

from pace_nb.cli import main
from pace_nb.core.errors import ConfigError, PaceNBError
from pace_nb.core.validation import Interval, declared, param
from pace_nb.experiments.grid import expand, parse_config
from pace_nb.methods.protocol import run_protocol
from pace_nb.methods.contract import Method
from pace_nb.methods.registry import METHODS, check_method_params, method_parameters, registered, runner


def test_parameters_are_the_runner_keywords_and_config_fields():
    for entry in METHODS.entries():
        names = set(method_parameters(entry.name))
        config = getattr(entry.obj, "Config", None)
        if config is not None:
            assert {f.name for f in dataclasses.fields(config)} <= names
        sig = inspect.signature(runner(entry))
        assert not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()) or config is not None, \
            f"{entry.name}: a function method must declare its hyperparameters (no **kwargs)"


@pytest.mark.parametrize("name", METHODS.names())
def test_unknown_parameter_names_the_valid_ones(name):
    with pytest.raises(ConfigError) as err:
        check_method_params(name, {"no_such_parameter": 1})
    msg = str(err.value)
    assert "\n" not in msg and "no_such_parameter" in msg
    for valid in method_parameters(name):
        assert re.search(rf"\b{re.escape(valid)}\b", msg.split("valid:")[1])


@pytest.mark.parametrize("name, params", [
    ("fedprox", {"mu": "0.01"}), ("fedprox", {"mu": -1.0}), ("fedprox", {"mu": float("nan")}),
    ("fednova", {"tau": 3}), ("fednova_sgd", {"momentum": 1.0}),
    ("fedrcl", {"tau": "0.05"}), ("fedrcl", {"tau": 0.0}), ("fedrcl", {"topk_neg": 2.5}), ("fedrcl", {"threshold": 2}),
    ("fedpub", {"n_proxy": "5"}), ("fedpub", {"layers": 4}), ("fedpub", {"l1": float("inf")}),
    ("fedaux1r", {"sigma": 0.1}), ("fedaux1r", {"head": "mlp"}), ("fedaux1r", {"similarity": 1}),
    ("fedavg", {"rounds": "3"}), ("fedavg", {"rounds": 0}), ("fedavg", {"local_epochs": 1.5}),
    ("pace", {"variants": ["nope"]}), ("pace", {"ranks": [-1]}), ("pace", {"base": "x"}),
])
def test_bad_value_is_a_config_error_naming_the_parameter(name, params):
    with pytest.raises(PaceNBError) as err:  # ConfigError, or UnknownNameError for a name
        check_method_params(name, params)
    (key,) = params
    assert "\n" not in str(err.value)
    assert key in str(err.value) or "variant" in str(err.value)


def test_every_config_field_declares_its_checks():
    for name, cls in registered().items():
        for f in dataclasses.fields(cls.Config):
            assert f.metadata.get("check"), f"{name}.Config.{f.name} declares no check"


def _method_with(config_body: dict, **attrs):
    """Define (not register) a Method subclass whose Config has the fields of ``config_body``."""
    config = dataclass(frozen=True)(type("Config", (), {"__annotations__": {k: float for k in config_body},
                                                        **config_body}))
    return type("Probe", (Method,), {"name": "probe", "Config": config, **attrs})


def test_an_unchecked_field_is_an_error_when_the_class_is_created():
    with pytest.raises(TypeError, match=r"Probe.Config.damping declares no check"):
        _method_with({"damping": 0.5})
    with pytest.raises(TypeError, match=r"unknown field metadata key\(s\) \['chek'\]"):
        _method_with({"damping": field(default=0.5, metadata={"chek": (Interval(float, 0, 1),)})})
    with pytest.raises(TypeError, match=r"its default 2.0 is not a float in \[0, 1\]"):
        _method_with({"damping": param(2.0, Interval(float, 0, 1))})
    with pytest.raises(TypeError, match="_parameter_constraints"):  # the old dict, even spelt right, is refused
        _method_with({"damping": param(0.5, Interval(float, 0, 1))},
                     _parameter_constraints={"dampnig": [Interval(float, 0, 1)]})
    probe = _method_with({"damping": param(0.5, Interval(float, 0, 1))})
    assert probe(damping=0.25).cfg.damping == 0.25
    with pytest.raises(ConfigError, match=r"probe: parameter 'damping' must be a float in \[0, 1\], got 3"):
        probe(damping=3)


def test_a_standalone_config_is_checked_at_declaration():
    with pytest.raises(TypeError, match="Settings.width declares no check"):
        @declared
        @dataclass(frozen=True)
        class Settings:
            width: int = 4


def test_aliases_resolve_and_duplicates_are_refused():
    assert METHODS.key("FedAux-1R") == METHODS.key("fedaux") == "fedaux1r"
    assert check_method_params("fedopt", {"server_lr": 0.1}) == {"server_lr": 0.1}
    from pace_nb.methods.registry import check_all_method_params

    with pytest.raises(ConfigError, match="twice"):
        check_all_method_params({"fedaux": {}, "fedaux1r": {}})


def test_run_protocol_refuses_a_typo_before_any_work(monkeypatch):
    import pace_nb.methods.protocol as protocol

    monkeypatch.setattr(protocol, "federation", lambda *a, **k: pytest.fail("built the federation"))
    with pytest.raises(ConfigError, match=r"method 'fedprox': unknown parameter\(s\) \['mmu'\]; valid: .*\bmu\b"):
        run_protocol("demo", methods=("local", "fedprox"), method_params={"fedprox": {"mmu": 0.1}})
    with pytest.raises(ConfigError, match="fedrcl: parameter 'tau'"):
        run_protocol("demo", methods=("fedrcl",), method_params={"fedrcl": {"tau": "x"}})
    with pytest.raises(ConfigError, match="varaints"):
        run_protocol("demo", methods=("pace",), method_params={"pace": {"varaints": ["full"]}})


def test_run_method_is_strict():
    from pace_nb.data.federation import build_federated

    fg = build_federated("demo", num_clients=2, seed=0)
    for name in ("fedavg", "fedcvae"):
        with pytest.raises(ConfigError, match="unknown parameter"):
            METHODS[name].run_method(fg, None, seeds=(0,), progress=False, typo=1)


GRID = """
[grid]
seeds = [1]
[[experiment]]
datasets = ["demo"]
clients = [3]
methods = ["local", "fedprox", "pace"]
method_params = {PARAMS}
"""


@pytest.mark.parametrize("params, message", [
    ("{ fedprox = { mmu = 0.01 } }", r"method 'fedprox': unknown parameter\(s\) \['mmu'\]; valid: local_epochs, mu, optimizer_state, rounds, weighting"),
    ('{ fedprox = { mu = "small" } }', "fedprox: parameter 'mu' must be a float"),
    ("{ fednova = { tau = 3 } }", "fednova: parameter 'tau' must be one of 'steps', 'train'"),
    ("{ nosuch = { x = 1 } }", "unknown method 'nosuch'"),
    ("{ pace = { ranks = [2] } }", "ranks is set for the whole section"),
    ("{ fedprox = 3 }", "must be a table of that method.s parameters"),
])
def test_grid_method_params_are_checked_on_load(params, message):
    cfg = parse_config(GRID.replace("{PARAMS}", params), path="g.toml")
    with pytest.raises(ConfigError, match=message) as err:
        expand(cfg)
    assert str(err.value).startswith("g.toml:")


def test_spear_section_method_params_are_checked():
    text = """
[[spear]]
datasets = ["demo"]
methods = ["spear", "fedavg"]
method_params = { fedavg = { rounds = 3 } }
"""
    with pytest.raises(ConfigError, match="set for the whole section"):
        expand(parse_config(text, path="s.toml"))
    with pytest.raises(ConfigError, match="unknown parameter"):
        expand(parse_config(text.replace("rounds = 3", "weigting = 'nodes'"), path="s.toml"))


def test_cli_grid_typo_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "g.toml"
    path.write_text(GRID.replace("{PARAMS}", "{ fedprox = { mmu = 0.01 } }"), encoding="utf-8")
    assert main(["grid", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pace-nb: error:") and "mmu" in err[0]


@pytest.mark.parametrize("param, message", [
    ("fedprox.mmu=0.1", r"method 'fedprox': unknown parameter\(s\) \['mmu'\]; valid: local_epochs, mu, optimizer_state, rounds, weighting"),
    ("fedprox.mu=abc", "fedprox: parameter 'mu' must be a float"),
    ("fednova.tau=steps", "'fednova' is not among --methods"),
    ("pace.ranks=[2]", "with --rank"),
    ("fedprox", "expected METHOD.NAME=VALUE"),
])
def test_cli_run_param_is_checked_before_any_work(param, message, capsys, monkeypatch):
    import pace_nb.methods.protocol as protocol

    monkeypatch.setattr(protocol, "federation", lambda *a, **k: pytest.fail("built the federation"))
    argv = ["run", "--clients", "3", "--seeds", "1", "--methods", "local,fedprox,pace", "--no-progress", "--param", param]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pace-nb: error:") and re.search(message, err[0])


def test_cli_run_param_reaches_the_method(tmp_path, monkeypatch, capsys):
    import pace_nb.methods.protocol as protocol

    seen = {}
    real = protocol.run_protocol

    def spy(*a, **k):
        seen.update(k["method_params"])
        return real(*a, **k)

    monkeypatch.setattr(protocol, "run_protocol", spy)
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    assert main(["run", "--clients", "3", "--seeds", "1", "--methods", "local,fedprox", "--device", "cpu",
                 "--no-progress", "--param", "fedprox.mu=0.5", "--param", "fedprox.weighting=train"]) == 0
    assert seen["fedprox"] == {"mu": 0.5, "weighting": "train"}
