"""Bad inputs a hostile or careless user can give: each must be ONE clean error (issue 13).

Through the CLI: one ``pace-nb: error:`` line, exit 2, no traceback, and nothing computed
before validation fails; through the Python API: a :class:`PaceNBError`.
"""
from __future__ import annotations

import math
import sys

import pytest
import torch
from torch_geometric.data import Data

from hostile_helpers import cli_error, write_planetoid
from pace_nb.core.errors import ConfigError, DataCorruptionError
from pace_nb.data import datasets as D
from pace_nb.data import federation as F

RUN = ["run", "--clients", "3", "--seeds", "1", "--methods", "local", "--no-progress"]
READ_ONLY = "/proc/pace_nb_no_such_dir"  # a place nobody (root included) can create files in
needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


@pytest.fixture(autouse=True)
def no_work(monkeypatch, tmp_path):
    """Every case here must fail before any training or notebook run starts."""
    import pace_nb.methods.protocol as protocol
    import pace_nb.notebooks as nbr

    monkeypatch.setattr(protocol, "run_protocol", lambda *a, **k: pytest.fail("computed before validating"))
    monkeypatch.setattr(nbr, "run_notebooks", lambda *a, **k: pytest.fail("ran notebooks before validating"))
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PACE_NB_RESULTS", str(tmp_path / "results"))
    D._load_cached.cache_clear()
    F._build_named.cache_clear()


# -- devices ---------------------------------------------------------------------------------
def test_device_tpu(capsys):
    cli_error(RUN + ["--device", "tpu"], capsys, "device")


def test_device_cuda_without_cuda(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cli_error(RUN + ["--device", "cuda"], capsys, "CUDA is not available")


# -- output targets, validated before computing ----------------------------------------------
def test_json_is_a_folder(tmp_path, capsys):
    cli_error(RUN + ["--json", str(tmp_path)], capsys, "is a folder")


def test_json_below_a_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    cli_error(RUN + ["--json", str(tmp_path / "f" / "out.json")], capsys, "is a file")


@needs_proc
def test_json_in_read_only_place(capsys):
    cli_error(RUN + ["--json", f"{READ_ONLY}/out.json"], capsys, "cannot write")


def test_tables_out_is_a_file(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "t").write_text("x")
    cli_error(["tables", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "t")], capsys, "is a file")


@needs_proc
def test_read_only_results_folder(capsys):
    cli_error(RUN + ["--store", READ_ONLY], capsys, "cannot write")


@needs_proc
def test_read_only_cache_folder(monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", READ_ONLY)
    with pytest.raises(ConfigError, match="cache folder"):
        F.build_federated("demo", "metis", 3)


@needs_proc
def test_read_only_results_store_append():
    from fake_results import make_rows
    from pace_nb.experiments.store import ResultsStore

    with pytest.raises(ConfigError, match="results folder"):
        ResultsStore(READ_ONLY).append(make_rows())


# -- config files ----------------------------------------------------------------------------
def test_binary_config(tmp_path, capsys):
    (tmp_path / "g.toml").write_bytes(b"\x00\x01\x02PK\x03\x04")
    cli_error(["grid", str(tmp_path / "g.toml")], capsys, "g.toml")


def test_non_utf8_config(tmp_path, capsys):
    (tmp_path / "g.toml").write_bytes('[[experiment]]\ndatasets = ["d\xe9mo"]\n'.encode("latin-1"))
    cli_error(["grid", str(tmp_path / "g.toml")], capsys, "not UTF-8")


def test_folder_as_config(tmp_path, capsys):
    cli_error(["grid", str(tmp_path)], capsys, "is a folder")


@pytest.mark.parametrize("where", ["[grid]\nseed_batch = 0\n", ""])
def test_seed_batch_zero(tmp_path, capsys, where):
    body = "" if where else "seed_batch = 0\n"
    (tmp_path / "g.toml").write_text(f'{where}[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n{body}')
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "seed_batch")


def test_grid_duplicated_seeds(tmp_path, capsys):
    (tmp_path / "g.toml").write_text('[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\nseeds = [1, 1]\n')
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "duplicated")


def test_grid_nan_learning_rate(tmp_path, capsys):
    (tmp_path / "g.toml").write_text('[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\ntrain = { lr = nan }\n')
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "'lr'")


# -- list values, seeds ----------------------------------------------------------------------
@pytest.mark.parametrize("argv,msg", [
    (["--rank", "6,,6"], "rank"), (["--methods", "local,local"], "duplicated"),
    (["--seeds", "2024,2024"], "duplicated"), (["--variants", ""], "variants"),
    (["--seeds", "-1"], "seeds"), (["--data-seed", str(2**40)], "--data-seed"),
])
def test_run_bad_lists_and_seeds(argv, msg, capsys):
    cli_error(RUN + argv, capsys, msg)


@pytest.mark.parametrize("argv,msg", [
    (["--seeds", "2024", "2024"], "duplicated"), (["--seeds", str(2**40)], "seeds"), (["--T", "1000"], "error: --T must be an int in [0, 64], got 1000"),
])
def test_spear_bad_inputs(argv, msg, capsys, monkeypatch):
    import pace_nb.methods.spear.analysis as sa

    monkeypatch.setattr(sa, "federation", lambda *a, **k: pytest.fail("computed before validating"))
    cli_error(["spear"] + argv, capsys, msg)


@pytest.mark.parametrize("argv,msg", [
    (["--resolution", "0"], "resolution"), (["--resolution", "-1"], "resolution"),
    (["--resolution", "nan"], "resolution"), (["--delta", "0"], "delta"), (["--seed", "-5"], "seed"),
])
def test_partition_bad_louvain_and_seed(argv, msg, capsys):
    cli_error(["partition", "--clients", "3", "--no-cache"] + argv, capsys, msg)


def test_tables_missing_results_folder(tmp_path, capsys):
    cli_error(["tables", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "t")], capsys, "does not exist")
    assert not (tmp_path / "nope").exists()


# -- the Python API: custom graphs -----------------------------------------------------------
def _graph(**over):
    g = torch.Generator().manual_seed(0)
    n = 60
    data = dict(x=torch.rand(n, 4, generator=g), edge_index=torch.stack([torch.arange(n), (torch.arange(n) + 1) % n]),
                y=torch.arange(n) % 3)
    data.update(over)
    return Data(**data)


@pytest.mark.parametrize("case,match", [
    ("nan features", "NaN/inf"), ("inf features", "NaN/inf"), ("edge id N", "outside"), ("negative edge", "outside"),
    ("float labels", "labels must be integers"), ("label >= num_classes", "labels must lie"),
    ("negative label", "labels must lie"),
])
def test_custom_data_rejected(case, match):
    x = torch.rand(60, 4)
    ei = torch.stack([torch.arange(60), (torch.arange(60) + 1) % 60])
    over = {
        "nan features": dict(x=x.index_fill(0, torch.tensor([3]), math.nan)),
        "inf features": dict(x=x.index_fill(0, torch.tensor([3]), math.inf)),
        "edge id N": dict(edge_index=torch.cat([ei, torch.tensor([[0], [60]])], 1)),
        "negative edge": dict(edge_index=torch.cat([ei, torch.tensor([[-1], [0]])], 1)),
        "float labels": dict(y=(torch.arange(60) % 3).float()),
        "label >= num_classes": dict(y=torch.arange(60) % 3, num_classes=2),
        "negative label": dict(y=torch.arange(60) % 3 - 1),
    }[case]
    with pytest.raises(ConfigError, match=match):
        F.build_federated(_graph(**over), "metis", 3, cache=False)


# -- raw files -------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_bad_raw_files(tmp_path, capsys, damage):
    raw = write_planetoid(tmp_path / "root")
    f = raw / "ind.cora.allx"
    f.write_bytes(f.read_bytes()[:50] if damage == "truncated" else b"\x89PNG not a pickle at all" * 10)
    with pytest.raises(DataCorruptionError, match="ind.cora|cannot be read"):
        D.load_dataset("Cora", root=tmp_path / "root")
    cli_error(["partition", "--dataset", "Cora", "--data-root", str(tmp_path / "root"), "--clients", "3"],
              capsys, "cannot be read")


# -- training configs ------------------------------------------------------------------------
@pytest.mark.parametrize("field,value", [("lr", math.nan), ("lr", math.inf), ("lr", 1e30), ("epochs", 0)])
def test_train_config_rejected(field, value):
    from pace_nb.nn.training import TrainConfig

    with pytest.raises(ConfigError, match=field):
        TrainConfig(**{field: value})


# -- grid configs: every value of a wrong type or range is one error, in the dry run ----------
EXP = '[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n'
SPEAR = '[[spear]]\ndatasets = ["demo"]\n'


@pytest.mark.parametrize("body,msg", [
    (EXP + 'beta = "abc"\n', "beta must be a float in (0, inf), got 'abc'"),
    (EXP + "beta = { x = 1 }\n", "beta must be a float in (0, inf)"),
    (EXP + "beta = true\n", "beta must be a float in (0, inf), got True"),
    (SPEAR + 'beta = "abc"\n', "[[spear]] beta must be a float in (0, inf)"),
    (SPEAR + "beta = -1.0\n", "beta must be a float in (0, inf), got -1.0"),
    (SPEAR + "beta = nan\n", "beta must be a float in (0, inf), got nan"),
    (EXP + "train = 5\n", "train must be a table"),
    (EXP + "train = []\n", "train must be a table"),
    (EXP + "method_params = 5\n", "method_params must be a table"),
    (EXP + "method_params = { fedprox = 5 }\n", "method_params.fedprox must be a table"),
    ("[grid]\ndata_root = 5\n" + EXP, "data_root must be a non-empty string"),
    ('[grid]\nstrict = "no"\n' + EXP, "strict must be true or false"),
    ('[[experiment]]\ndatasets = ["demo"]\nmethods = []\n', "at least one value"),
    (SPEAR + "methods = []\n", "[[spear]] methods: at least one value is needed"),
    (EXP + "clients = [1000000000000000000]\n", "clients must be an int in [2, 10000000]"),
    (SPEAR + "clients = 1000000000000000000\n", "clients must be an int in [2, 10000000]"),
    (EXP + "ranks = []\n", "ranks: at least one value"),
    (EXP + "ranks = [6, 6]\n", "ranks: duplicated"),
    (EXP + "ranks = [9223372036854775807]\n", "ranks must be integers in"),
    (SPEAR + "efficiency = true\nrounds = 1000000000\n", "rounds must be an int in [1, 100000]"),
    (SPEAR + "robustness = true\nrho = 2.0\n", "rho must be a float in [0, 1]"),
    (SPEAR + "robustness = true\neta = -0.5\n", "eta must be a float in [0, 1]"),
    (SPEAR + 'robustness = "yes"\n', "robustness must be true or false"),
    (SPEAR + 'methods = ["spear", "fedavg"]\nrun_seed = -1\n', "run_seed must be an int in [0, 4294967295]"),
    (EXP + "seeds = [" + ", ".join(map(str, range(1000))) + "]\n", "at most 256"),
])
def test_grid_config_values_rejected_in_dry_run(tmp_path, capsys, body, msg):
    (tmp_path / "g.toml").write_text(body)
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, msg)


def test_grid_of_a_million_cells_refused_quickly(tmp_path, capsys):
    import time

    seeds = ", ".join(map(str, range(200)))
    (tmp_path / "g.toml").write_text(f'[grid]\nseed_batch = 1\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n'
                                     f'seeds = [{seeds}]\ndata_seed = [{seeds}]\nclients = [{", ".join(map(str, range(2, 27)))}]\n')
    t0 = time.perf_counter()
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "1,000,000 cells, more than the limit")
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("yaml_text", [
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
    "grid: &g\n  self: *g\n",
])
def test_yaml_alias_bombs_refused(tmp_path, capsys, yaml_text):
    (tmp_path / "g.yaml").write_text(yaml_text)
    cli_error(["grid", str(tmp_path / "g.yaml"), "--dry-run"], capsys, "YAML aliases")


def test_grid_config_fifo_refused_not_opened(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "g.toml")
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "not a regular file")


# -- the CLI: sizes and output targets before any work ----------------------------------------
@pytest.mark.parametrize("argv,msg", [
    (["--rank", "99999999999999999999999"], "--rank must be integers in"),
    (["--beta", "inf", "--partition", "dirichlet"], "--beta must be a finite number"),
    (["--seeds", ",".join(map(str, range(1000)))], "at most 256"),
    (["--clients", str(10**20)], "--clients must be at most"),
])
def test_run_sizes_refused_before_training(argv, msg, capsys):
    cli_error(RUN + argv, capsys, msg)


@pytest.mark.parametrize("argv,msg", [
    (["--rounds", "1000000000", "--methods", "spear,fedavg"], "--rounds must be an integer in"),
    (["--beta", "-1"], "--beta must be a finite number > 0"),
    (["--beta", "nan", "--methods", "spear,fedavg"], "--beta must be a finite number > 0"),
    (["--run-seed", "-3", "--methods", "spear,fedavg"], "--run-seed"),
])
def test_spear_sizes_refused_before_work(argv, msg, capsys, monkeypatch):
    import pace_nb.methods.spear.analysis as sa

    monkeypatch.setattr(sa, "federation", lambda *a, **k: pytest.fail("computed before validating"))
    cli_error(["spear"] + argv, capsys, msg)


@pytest.mark.parametrize("methods", [[], ["--methods", "spear,fedavg"]])
def test_spear_json_folder_refused_before_work(tmp_path, capsys, monkeypatch, methods):
    import pace_nb.methods.spear.analysis as sa

    monkeypatch.setattr(sa, "federation", lambda *a, **k: pytest.fail("computed before validating"))
    cli_error(["spear", "--json", str(tmp_path)] + methods, capsys, "is a folder")


@pytest.mark.parametrize("target", ["folder", "below a file"])
def test_flower_simulate_json_checked_up_front(tmp_path, capsys, monkeypatch, target):
    pytest.importorskip("flwr")
    from pace_nb.data import federation as fed

    monkeypatch.setattr(fed, "build_federated", lambda *a, **k: pytest.fail("computed before validating"))
    (tmp_path / "f").write_text("x")
    path = tmp_path if target == "folder" else tmp_path / "f" / "out.json"
    cli_error(["flower", "simulate", "--engine", "inprocess", "--json", str(path)], capsys,
              "is a folder" if target == "folder" else "is a file")


@pytest.mark.parametrize("timeout", ["0", "-5"])
def test_figures_timeout_must_be_positive(capsys, timeout):
    cli_error(["figures", "--timeout", timeout], capsys, "--timeout must be")


# -- the Python API: graphs made like the loaded datasets, or refused --------------------------
def test_edgeless_graph_with_louvain_is_one_error():
    with pytest.raises(ConfigError, match="Louvain needs edges"):
        F.build_federated(_graph(edge_index=torch.zeros(2, 0, dtype=torch.long)), "louvain", 3, cache=False)


def test_huge_features_refused():
    with pytest.raises(ConfigError, match="scale or standardize"):
        F.build_federated(_graph(x=torch.rand(60, 4) * 1e30), "metis", 3, cache=False)


@pytest.mark.parametrize("case", ["y column", "sparse x", "duplicate edges"])
def test_custom_data_normalized_like_loaded_datasets(case):
    """A [N, 1] label column, a sparse x and repeated edges give the very federation of the plain graph."""
    plain = _graph()
    over = {"y column": dict(y=plain.y.view(-1, 1)), "sparse x": dict(x=plain.x.to_sparse()),
            "duplicate edges": dict(edge_index=torch.cat([plain.edge_index] * 3, 1))}[case]
    a = F.build_federated(_graph(), "metis", 3, cache=False)
    b = F.build_federated(_graph(**over), "metis", 3, cache=False)
    for ca, cb in zip(a.clients, b.clients, strict=True):
        assert torch.equal(ca.edge_index, cb.edge_index) and torch.equal(ca.x, cb.x) and torch.equal(ca.y, cb.y)
        assert cb.x.layout == torch.strided and cb.y.dim() == 1
    assert b.clients[0].edge_index.shape[1] == a.clients[0].edge_index.shape[1]  # not counted 3 times


def test_unknown_pace_variant_rejected_before_training(capsys):
    cli_error(RUN + ["--methods", "local,pace", "--variants", "fulll"], capsys, "fulll")


@pytest.mark.parametrize("beta", ["inf", "nan", "-1"])
def test_partition_beta_must_be_finite_and_positive(capsys, beta):
    cli_error(["partition", "--clients", "3", "--no-cache", "--scheme", "dirichlet", "--beta", beta], capsys, "beta")


def test_oversized_config_refused_unread(tmp_path, capsys):
    (tmp_path / "g.toml").write_text(EXP + "#" * (2 << 20) + "\n")
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "more than the 1,048,576 a config may have")


def test_long_duplicated_lists_fail_fast(tmp_path, capsys):
    import time

    t0 = time.perf_counter()
    (tmp_path / "g.toml").write_text(EXP + "ranks = [" + ", ".join(["6"] * 100_000) + "]\n")
    cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run"], capsys, "ranks: duplicated value(s) [6]")
    assert time.perf_counter() - t0 < 10
