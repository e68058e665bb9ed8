"""SPEAR Fig. 4(b) sweeps over datasets and data seeds (pace_nb.methods.spear.sensitivity), on synthetic federations."""
from __future__ import annotations

import numpy as np
import pytest

from pace_nb.core.errors import ConfigError
from pace_nb.methods.spear import analysis as sa
from pace_nb.methods.spear import core as sp
from pace_nb.methods.spear import sensitivity as se

from synthetic import make_fed

PARTS = [list(range(0, 20)), list(range(20, 40)), list(range(40, 60))]


def picky(max_clients: int, calls: list):
    """A builder that rejects more than ``max_clients`` clients, as the Dirichlet partitioner does on small graphs."""
    def build(dataset, beta, num_clients, seed):
        calls.append((num_clients, seed))
        if num_clients > max_clients:
            raise ConfigError("cannot split")
        fg = make_fed(PARTS, seed=seed)
        fg.dataset = dataset
        fg.config = {"scheme": "dirichlet", "beta": beta, "seed": seed}
        return fg
    return build


def test_federations_take_the_largest_k_every_seed_allows():
    calls: list = []
    fgs = se.federations("tiny", seeds=(1, 2), num_clients=5, builder=picky(3, calls))
    assert len(fgs) == 2 and [c for c in calls if c[0] == 3] == [(3, 1), (3, 2)]
    assert {k for k, _ in calls} == {5, 4, 3}  # tried downwards from K, stopped at the first that works
    with pytest.raises(ConfigError, match="no Dirichlet partition"):
        se.federations("tiny", seeds=(1,), num_clients=4, builder=picky(1, []))


def test_sweep_seeds_rows_match_direct_runs_and_summary_is_mean_and_sample_sd():
    rows = se.sweep_seeds("tiny", ("a", "T"), {"a": [0.0, 0.5], "T": [0, 2]}, seeds=(3, 4, 5), num_clients=3,
                          builder=picky(3, []))
    assert len(rows) == 3 * 4 and set(rows["seed"]) == {3, 4, 5} and set(rows["dataset"]) == {"tiny"}
    direct = {s: 100 * sp.run_spear(make_fed(PARTS, seed=s), sp.SpearConfig(a=0.5)).acc for s in (3, 4, 5)}
    at = rows[(rows["swept"] == "a") & (rows["a"] == 0.5)].set_index("seed")["acc"]
    assert at.to_dict() == pytest.approx(direct)
    out = se.summary(rows, "a", 0.5).iloc[0]
    accs = np.array(list(direct.values()))
    assert out["mean"] == pytest.approx(accs.mean()) and out["std"] == pytest.approx(accs.std(ddof=1))
    assert out["seeds"] == 3 and out["K"] == 3


def test_paper_setting_is_spear_config_defaults():
    cfg = sp.SpearConfig()
    assert se.paper_setting(0.1) == {"beta": 0.1, "gamma": cfg.gamma, "T": cfg.T, "a": cfg.a}
    assert set(se.paper_setting()) - {"beta"} <= set(sa.HYPER_GRIDS)
