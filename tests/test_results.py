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
