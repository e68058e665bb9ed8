"""App. A diagnostics against scipy and hand-counted frames."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fake_results import make_rows
from pace_nb.analysis import diagnostics as dg
from pace_nb.core.errors import ConfigError


def _pair_frame(treat, ctrl, dataset="Cora"):
    rows = []
    for s, (a, b) in enumerate(zip(treat, ctrl, strict=True)):
        for method, variant, rank, v in (("pace", "full", 6, a), ("local", "native", 0, b)):
            rows.append(dict(dataset=dataset, partition="louvain", beta=np.nan, num_clients=10, seed=s,
                             method=method, variant=variant, rank=rank, receiver=-1, acc=v, f1_weighted=v))
    return pd.DataFrame(rows)


def test_paired_t_matches_scipy_hand_case():
    pace = np.array([80.1, 79.5, 81.0, 80.4, 79.9])
    local = np.array([79.2, 79.4, 79.0, 79.3, 79.1])
    out = dg.paired_t(pace - local)
    ref = stats.ttest_rel(pace, local)
    assert out["t"] == pytest.approx(ref.statistic) and out["p"] == pytest.approx(ref.pvalue)
    d = pace - local  # independent hand computation of the interval
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert out["mean"] == pytest.approx(0.98) and out["n"] == 5
    ci = stats.ttest_rel(pace, local).confidence_interval(0.95)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((ci.low, ci.high))


def test_paired_summary_pairs_by_seed_and_counts_wtl():
    pace = [80.00, 79.005, 79.50, 81.00, 78.00]
    local = [79.00, 79.00, 79.50, 79.00, 79.00]  # diffs +1, +0.005 (tie), 0 (tie), +2, -1
    summ = dg.paired_summary(_pair_frame(pace, local), metrics=("acc",))
    row = summ.iloc[0]
    assert (row.wins, row.ties, row.losses) == (2, 2, 1)
    assert row["mean"] == pytest.approx(np.mean(np.subtract(pace, local)))
    assert np.isnan(row.beta) and row.dataset == "Cora"
    # the 0.01-point tolerance boundary: exactly 0.01 ties, 0.02 wins
    assert dg.win_tie_loss([0.01, -0.01, 0.02, -0.02]) == (1, 2, 1)


def test_shuffled_rows_pair_correctly():
    frame = _pair_frame([80, 81, 82], [79, 79, 79]).sample(frac=1, random_state=0)
    diffs = dg.paired_differences(frame)
    assert list(diffs["diff"]) == [1, 2, 3] and list(diffs["seed"]) == [0, 1, 2]


def test_harm_counts_and_worst_receiver_hand_frame():
    # 2 receivers x 3 seeds; diffs: r0: +1, 0, -2 ; r1: +0.5, +0.5, -0.5
    diffs = {(0, 0): 1.0, (1, 0): 0.0, (2, 0): -2.0, (0, 1): 0.5, (1, 1): 0.5, (2, 1): -0.5}
    rows = []
    for (s, r), d in diffs.items():
        for method, variant, v in (("pace", "full", 70 + d), ("local", "native", 70.0)):
            rows.append(dict(dataset="CiteSeer", partition="louvain", beta=np.nan, num_clients=2, seed=s,
                             method=method, variant=variant, rank=0, receiver=r, acc=v,
                             alpha=0.0 if (method == "pace" and d == 0) else (1.0 if d == 1 else 0.3)))
    units = dg.receiver_units(pd.DataFrame(rows))
    assert len(units) == 6
    h = dg.harm_counts(units, by=None).iloc[0]
    assert (h.units, h.helped, h.tied, h.harmed) == (6, 3, 1, 2)
    means = dg.receiver_means(units).set_index("receiver")
    assert means.loc[0, "mean_diff"] == pytest.approx(-1 / 3) and means.loc[1, "mean_diff"] == pytest.approx(1 / 6)
    w = dg.worst_receiver(units).iloc[0]
    assert w.nonnegative_means == 1 and w.worst_mean == pytest.approx(-1 / 3) and w.worst_mean_receiver == 0
    assert w.worst_unit == pytest.approx(-2.0) and w.worst_unit_seed == 2 and w.worst_unit_receiver == 0
    a = dg.alpha_utilisation(pd.DataFrame(rows)).iloc[0]
    assert a.units == 6 and a.alpha_zero_frac == pytest.approx(1 / 6) and a.alpha_one_frac == pytest.approx(1 / 6)


def test_acc_local_fallback_and_generic_arms():
    rows = make_rows(methods={("pace", "full", 6): 1.0, ("fedavg", "cnll", 0): 0.5})
    units = dg.receiver_units(rows)  # no Local rows: uses the PACE rows' acc_local
    assert len(units) == 15 and np.allclose(units["diff"], 1.0)
    summ = dg.paired_summary(rows, treatment=("pace", "full"), control=("fedavg", "cnll"), metrics=("acc",))
    assert summ.iloc[0]["mean"] == pytest.approx(0.5) and summ.iloc[0].wins == 5
    rep = dg.diagnostics_report(make_rows())
    assert set(rep) == {"paired", "harm", "harm_total", "receivers", "worst", "alpha"}


def test_errors():
    with pytest.raises(ConfigError, match="metric"):
        dg.paired_differences(make_rows(), metric="nope")
    dup = make_rows(methods={("pace", "full", 6): 1.0, ("pace", "full", 4): 0.0, ("local", "native", 0): 0})
    with pytest.raises(ConfigError, match="rank"):
        dg.paired_differences(dup)
    assert len(dg.paired_differences(dup, treatment=("pace", "full", 4))) == 5
