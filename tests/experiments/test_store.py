"""Results store: round trip, typed columns, no duplicates on rerun, corruption detected."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.core.errors import ConfigError, DataCorruptionError
from pace_nb.analysis.summary import summarize as summary_frame
from pace_nb.experiments.store import COLUMNS, ResultsStore, load_results, stable_key


def test_location_argument_env_default(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_RESULTS", str(tmp_path / "env"))
    assert ResultsStore().root == tmp_path / "env"
    assert ResultsStore(tmp_path / "arg").root == tmp_path / "arg"


def test_round_trip_typed_and_exact(tmp_path):
    store = ResultsStore(tmp_path)
    rows = make_rows()
    rows.loc[0, "acc"] = 1 / 3  # exact float round trip through CSV
    key = store.append(rows, cell_key="c1", cell={"dataset": "Cora"})
    assert key == "c1" and store.has("c1") and not store.has("c2")
    out = store.load()
    assert list(out.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert len(out) == len(rows)
    assert out.dtypes["seed"] == np.int64 and out.dtypes["receiver"] == np.int64
    assert out.dtypes["acc"] == np.float64 and out["method"].map(type).eq(str).all()
    assert (out["acc"] == 1 / 3).sum() == 1
    assert out["alpha"].isna().sum() == rows["alpha"].isna().sum()
    assert len(store.pooled()) == 10 and len(store.receivers()) == 30
    assert set(store.load(method="pace", seed=[1, 2]).seed) == {1, 2}
    assert store.cells().loc[0, "dataset"] == "Cora"


def test_reappend_replaces_never_duplicates(tmp_path):
    store = ResultsStore(tmp_path)
    rows = make_rows()
    store.append(rows, cell_key="c1")
    store.append(rows, cell_key="c1")
    k1 = store.append(rows)  # key from row identities: same rows, same key
    k2 = store.append(rows)
    assert k1 == k2
    assert len(store.load()) == len(rows)  # identical rows in two cells are kept once
    assert len(store.load(dedupe=False)) == 2 * len(rows)


def test_beta_from_params_and_summary(tmp_path):
    store = ResultsStore(tmp_path)
    store.append(make_rows(partition="dirichlet", beta=0.5), cell_key="d")
    store.append(make_rows(), cell_key="l")
    assert set(store.load(partition="dirichlet").beta) == {0.5}
    assert store.load(partition="louvain").beta.isna().all()
    summ = summary_frame(tmp_path)
    assert len(summ) == 4
    pace = summ[(summ.method == "pace") & (summ.partition == "louvain")].iloc[0]
    accs = 70 + 1 + 0.1 * np.arange(1, 6)
    assert pace.acc_mean == pytest.approx(accs.mean()) and pace.acc_std == pytest.approx(accs.std(ddof=1))
    assert pace.n_seeds == 5 and pace.alpha_mean == 0.5 and pace.alpha_zero_frac == 0.0
    assert len(load_results(tmp_path, method="local")) == 40


def test_corrupted_or_truncated_file_detected(tmp_path):
    store = ResultsStore(tmp_path)
    store.append(make_rows(), cell_key="good")
    store.append(make_rows(dataset="CiteSeer"), cell_key="bad")
    path = tmp_path / "cells" / "bad.csv"
    path.write_bytes(path.read_bytes()[:-40])  # truncated
    with pytest.raises(DataCorruptionError, match="bad.csv"):
        store.load()
    with pytest.raises(DataCorruptionError, match="bad.csv"):
        store.has("bad")
    store.discard("bad")
    data = (tmp_path / "cells" / "good.csv").read_text().replace("70.1", "99.1", 1)
    (tmp_path / "cells" / "good.csv").write_text(data)  # same length, edited value
    with pytest.raises(DataCorruptionError, match="good.csv.*checksum"):
        store.load()
    (tmp_path / "cells" / "good.json").write_text("{not json")
    with pytest.raises(DataCorruptionError, match="good.json"):
        store.load()
    store.discard("good")
    assert store.load().empty


def test_uncommitted_csv_is_ignored(tmp_path):
    store = ResultsStore(tmp_path)
    store.append(make_rows(), cell_key="c")
    (tmp_path / "cells" / "c.json").unlink()  # killed between the data and manifest writes
    assert not store.has("c") and store.load().empty


def test_bad_rows_rejected(tmp_path):
    with pytest.raises(ConfigError, match="seed"):
        ResultsStore(tmp_path).append(pd.DataFrame({"dataset": ["Cora"], "acc": [1.0]}))
    bad = make_rows()
    bad.loc[0, "receiver"] = np.nan
    with pytest.raises(ConfigError, match="receiver"):
        ResultsStore(tmp_path).append(bad)
    with pytest.raises(ConfigError, match="unknown column"):
        ResultsStore(tmp_path).load(colour="red")


def test_stable_key():
    assert stable_key({"a": 1, "b": [1, 2]}) == stable_key({"b": [1, 2], "a": 1})
    assert stable_key({"a": 1}) != stable_key({"a": 2})
    assert json.dumps(stable_key({})) and len(stable_key({})) == 16


# -- the dimension columns: set by the row builders, migrated from params for older rows ------------
DIMENSIONS = ["study", "evaluation", "beta", "scope", "data_seed", "run_seed"]


def _as_old_store(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` as a store written before the dimension columns held them (params only)."""
    return rows.drop(columns=[c for c in DIMENSIONS if c in rows.columns])


def _dims(rows: pd.DataFrame) -> list[tuple]:
    return [tuple(r) for r in rows[DIMENSIONS].astype(object).where(rows[DIMENSIONS].notna(), None).to_numpy()]


@pytest.fixture(scope="module")
def built_rows():
    """Rows of every builder on the demo graph: PACE's protocol (Local + PACE, Dirichlet β = 0.5),
    SPEAR's ablation and robustness, a one-shot method through the protocol and alone, and SPEAR's
    comparison (SPEAR, a one-shot and a multi-round baseline, data seed 2025)."""
    from pace_nb.data.federation import build_federated
    from pace_nb.methods.oneshot import make_oneshot
    from pace_nb.methods.oneshot.base import run_oneshot
    from pace_nb.methods.oneshot.compare import run_comparison
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.methods.spear import analysis as sa
    from pace_nb.nn.training import TrainConfig

    tc = TrainConfig(epochs=5)
    fg = build_federated("demo", scheme="dirichlet", num_clients=3, seed=2025, beta=0.5)
    return {
        "pace": run_protocol("demo", partition="dirichlet", beta=0.5, num_clients=3, seeds=(11,), train_config=tc,
                             methods=["local", "pace"], device="cpu", progress=False),
        "spear": run_protocol(fg, seeds=(11,), methods=["spear"], method_params={"spear": {"variants": ["full", "no_ppr"]}},
                              device="cpu", progress=False),
        "robustness": sa.robustness(fg, scope="global"),
        "oneshot_protocol": run_protocol(fg, seeds=(12,), methods=["centroid_sbm"], train_config=tc, device="cpu",
                                         progress=False),
        "oneshot_alone": pd.DataFrame(run_oneshot(fg, make_oneshot("centroid_sbm"), (12,), config=tc, device="cpu",
                                                  progress=False)),
        "comparison": run_comparison(fg, ["spear", "centroid_sbm", "fedavg"], rounds=2, local_epochs=1, run_seed=13,
                                     config=tc, device="cpu"),
    }


def test_row_builders_set_the_dimension_columns(built_rows):
    from pace_nb.experiments.store import normalize_rows

    r = {k: normalize_rows(v) for k, v in built_rows.items()}
    assert set(_dims(r["pace"])) == {("pace", "receivers", 0.5, "", 2024, 11)}
    assert (r["pace"].seed == r["pace"].run_seed).all() and set(r["pace"].receiver) == {-1, 0, 1, 2}
    assert set(_dims(r["spear"])) == {("spear", "complete_graph", 0.5, "", 2025, -1)}
    assert set(r["spear"].seed) == {2025}  # SPEAR's seed column is the data seed
    assert set(_dims(r["robustness"])) == {("spear", "complete_graph", 0.5, "global", 2025, -1)}
    assert _dims(r["oneshot_protocol"]) == [("comparison", "complete_graph", 0.5, "", 2025, 12)]
    assert r["oneshot_protocol"].seed.item() == 12 and r["oneshot_alone"].seed.item() == 12
    assert _dims(r["oneshot_alone"]) == [("comparison", "complete_graph", 0.5, "", 2025, 12)]
    comp = r["comparison"].set_index("method")
    assert set(comp.seed) == {2025} and set(comp.study) == {"comparison"} and set(comp.evaluation) == {"complete_graph"}
    assert comp.run_seed.to_dict() == {"spear": -1, "centroid_sbm": 13, "fedavg": 13}
    assert set(comp.data_seed) == {2025} and set(comp.beta) == {0.5}
    for frame in r.values():  # the params still record what the rows were derived from before
        assert all(json.loads(p) for p in frame.params)


@pytest.mark.parametrize("kind", ["pace", "spear", "robustness", "oneshot_protocol", "comparison"])
def test_old_rows_migrate_to_the_built_columns(built_rows, kind, tmp_path):
    """A store of rows without the dimension columns (params only, as the shipped store) loads with
    the very values the builders set: every column of the loaded frames agrees."""
    from pace_nb.experiments.store import normalize_rows

    rows = built_rows[kind]
    old, new = ResultsStore(tmp_path / "old"), ResultsStore(tmp_path / "new")
    old.append(_as_old_store(rows), cell_key="c")
    new.append(rows, cell_key="c")
    pd.testing.assert_frame_equal(old.load(), new.load(), check_exact=True)
    pd.testing.assert_frame_equal(normalize_rows(_as_old_store(rows)), normalize_rows(rows), check_exact=True)


def test_migration_rules_on_hand_built_params():
    """Each rule of ``normalize_rows``' migration on one old row (columns absent, params JSON)."""
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.experiments.store import normalize_rows

    base = dict(dataset="Cora", partition="dirichlet", num_clients=10, variant="native", rank=0, receiver=-1, acc=50.0)
    cases = [  # (method, seed, params) → (study, evaluation, beta, scope, data_seed, run_seed)
        ("pace", 7, {"data": {"seed": 2025, "beta": 0.5}}, ("pace", "receivers", 0.5, "", 2025, 7)),
        ("fedavg", 7, {}, ("pace", "receivers", None, "", -1, 7)),
        ("fedavg", 2024, {"evaluation": "complete_graph", "run_seed": 9, "beta": 0.05},
         ("comparison", "complete_graph", 0.05, "", 2024, 9)),
        ("fedpub", 2024, {"evaluation": "complete_graph_mean_over_receivers", "run_seed": 9},
         ("comparison", "complete_graph", None, "", 2024, 9)),
        ("fedcvae", 9, {"evaluation": "complete_graph", "run_seed": 9}, ("comparison", "complete_graph", None, "", -1, 9)),
        ("spear", 2026, {"T": 2, "a": 0.5, "gamma": 0.1, "beta": 0.05, "scope": "clients"},
         ("spear", "complete_graph", 0.05, "clients", 2026, -1)),
        ("spear", 2026, {}, ("spear", "complete_graph", None, "", 2026, -1)),
        ("fedavg", 2026, {"T": 2, "a": 0.5, "gamma": 0.1, "rounds": 100},
         ("spear", "complete_graph", None, "", 2026, PAPER_SEEDS[0])),
    ]
    rows = pd.DataFrame([dict(base, method=m, seed=s, params=json.dumps(p)) for m, s, p, _ in cases])
    out = normalize_rows(rows)
    assert _dims(out) == [want for *_, want in cases]
    assert out.dtypes["data_seed"] == np.int64 and out.dtypes["run_seed"] == np.int64
    kept = normalize_rows(rows.assign(study="spear", scope="global", run_seed=3))  # values present: never re-derived
    assert set(kept.study) == {"spear"} and set(kept.scope) == {"global"} and set(kept.run_seed) == {3}
    assert set(kept.evaluation) == {"complete_graph"}


def test_shipped_store_loads_through_the_migration():
    """The shipped store (written before the dimension columns) loads with each of them filled."""
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "results"
    rows = ResultsStore.for_reading(shipped).load()
    assert set(rows.study) == {"pace", "comparison", "spear"} and (rows.scope != "").any()
    pace = rows[rows.study == "pace"]
    assert (pace.evaluation == "receivers").all() and (pace.seed == pace.run_seed).all() and (pace.data_seed >= 0).all()
    other = rows[rows.study != "pace"]
    assert (other.evaluation == "complete_graph").all() and (other.seed == other.data_seed).all()
    assert (rows[rows.partition == "dirichlet"].beta > 0).all() and rows[rows.partition != "dirichlet"].beta.isna().all()
    assert (rows[rows.method == "spear"].run_seed == -1).all()
