"""Integration: run_protocol on the demo graph and ``pace-nb run --json``."""
import json

import numpy as np
import pytest

from pace_nb.cli import main
from pace_nb.core.errors import UnknownNameError
from pace_nb.analysis.summary import summarize
from pace_nb.methods.protocol import available_methods, get_method, run_protocol
from pace_nb.nn.training import TrainConfig

QUICK = TrainConfig(epochs=20)


@pytest.fixture(scope="module")
def demo_rows():
    return run_protocol("demo", num_clients=4, seeds=(104729, 130363), method_params={"pace": {"variants": ("full", "transport"), "ranks": (6,)}},
                        device="cpu", progress=False, train_config=QUICK)


def test_run_protocol_demo(demo_rows):
    rows = demo_rows
    assert set(rows.method) == {"local", "pace"}
    assert rows.groupby(["method", "variant"]).seed.nunique().eq(2).all()
    pooled = rows[rows.receiver == -1]
    assert pooled.acc.between(0, 100).all() and (pooled.dataset == "demo").all()
    pace = rows[(rows.method == "pace") & (rows.receiver >= 0)]
    assert pace.alpha.between(0, 1).all() and pace.upload_ratio.gt(0).all()
    # the same Local models serve every method: acc_local of PACE receivers = Local's acc
    loc = rows[(rows.method == "local") & (rows.receiver >= 0)].set_index(["seed", "receiver"]).acc
    full = pace[pace.variant == "full"].set_index(["seed", "receiver"]).acc_local
    np.testing.assert_array_equal(loc.sort_index().values, full.sort_index().values)
    summ = summarize(rows)
    assert {"acc_mean", "acc_std", "f1w_mean", "f1w_std", "f1m_mean", "alpha_mean", "alpha_zero_frac",
            "upload_ratio", "return_ratio"} <= set(summ.columns)
    assert len(summ) == 3


def test_registry_unknown_and_plugin():
    with pytest.raises(UnknownNameError, match="valid methods: .*pace"):
        get_method("nonexistent")
    assert {"local", "pace"} <= set(available_methods())
    with pytest.raises(UnknownNameError):
        run_protocol("demo", methods=("bogus",), seeds=(1,))


def test_cli_run_json(tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(["run", "--dataset", "demo", "--clients", "3", "--seeds", "104729", "--variants", "full,transport",
               "--device", "cpu", "--results", str(tmp_path / "res"), "--json", str(out), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    table = text.split("\n", 1)[1]  # after the title line
    assert "pace" in table and "local" in table and "±" not in table  # one seed: no std
    payload = json.loads(out.read_text())
    assert set(payload) == {"summary", "receivers", "config"}
    methods = {(s["method"], s["variant"]) for s in payload["summary"]}
    assert methods == {("local", "native"), ("pace", "full"), ("pace", "transport")}
    for s in payload["summary"]:
        assert {"method", "acc_mean", "acc_std", "f1w_mean", "f1w_std", "f1m_mean"} <= set(s)
        if s["method"] == "pace":
            assert 0 <= s["alpha_mean"] <= 1 and s["upload_ratio"] > s["return_ratio"] > 0
    assert len(payload["receivers"]) == 3 * 3
    assert payload["config"]["seeds"] == [104729]
    assert (tmp_path / "res").is_dir()


def test_cli_rank_of_the_layer_width_reports_dense(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--clients", "3", "--seeds", "104729", "--methods", "pace", "--rank", "64",
                 "--device", "cpu", "--no-progress", "--json", str(out)]) == 0
    assert "sent dense" in capsys.readouterr().out
    (s,) = json.loads(out.read_text())["summary"]
    assert s["upload_ratio"] >= 100 and s["return_ratio"] >= 100 and s["rank"] == 64


@pytest.mark.parametrize("rank", ["100000", "65", "2,65"])
def test_cli_impossible_rank_is_one_line_before_training(rank, capsys, monkeypatch):
    import pace_nb.nn.training as training

    monkeypatch.setattr(training, "train_local", lambda *a, **k: pytest.fail("trained before the rank check"))
    assert main(["run", "--clients", "3", "--seeds", "104729", "--methods", "local,pace", "--rank", rank,
                 "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pace-nb: error: PACE ranks: rank ")
    assert "impossible" in err and "at most 64" in err


def test_dense_has_one_spelling(capsys):
    assert main(["run", "--no-progress", "--clients", "3", "--seeds", "1", "--rank", "dense"]) == 2
    assert "0 for dense" in capsys.readouterr().err


@pytest.mark.parametrize("argv,msg", [(["--rank", "-2"], "rank"), (["--rank", "x"], "rank"),
                                      (["--methods", "nope"], "unknown method"), (["--seeds", "a,b"], "seeds")])
def test_cli_bad_input(argv, msg, capsys):
    assert main(["run", "--no-progress", "--clients", "3", "--seeds", "1"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pace-nb: error:") and msg in err and "Traceback" not in err


@pytest.mark.slow
def test_cora_one_seed_matches_paper_shape():
    """Cora, Louvain K = 10, one paper seed: byte ratios and the Table 2 pattern."""
    from conftest import require_dataset

    require_dataset("Cora")
    rows = run_protocol("Cora", seeds=(104729,), method_params={"pace": {"variants": ("full", "transport")}}, device="cpu", progress=False)
    s = summarize(rows).set_index("variant")
    assert 77.5 <= s.loc["native", "acc_mean"] <= 81
    assert s.loc["transport", "acc_mean"] <= s.loc["native", "acc_mean"] - 10   # full adoption hurts on Cora
    assert s.loc["full", "acc_mean"] > s.loc["native", "acc_mean"]            # CNLL recovers and improves
    assert 0.4 <= s.loc["full", "alpha_mean"] <= 0.9
    assert abs(s.loc["full", "upload_ratio"] - 12.1) <= 1.5 and abs(s.loc["full", "return_ratio"] - 10.3) <= 1.5
