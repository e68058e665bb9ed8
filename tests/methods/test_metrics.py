"""Metrics with a fixed class set; paired t intervals; Win/Tie/Loss."""
import numpy as np
import pytest
from scipy import stats

from pace_nb.methods import metrics
from pace_nb.core.errors import ConfigError


def _manual_f1(yt, yp, classes):
    f1s, sup = [], []
    for c in classes:
        tp = np.sum((yp == c) & (yt == c))
        fp = np.sum((yp == c) & (yt != c))
        fn = np.sum((yp != c) & (yt == c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
        sup.append(np.sum(yt == c))
    f1s, sup = np.array(f1s), np.array(sup)
    return f1s.mean(), (f1s * sup).sum() / sup.sum()


def test_f1_uses_fixed_class_set():
    yt = np.array([0, 0, 1, 1, 2, 2, 2])
    yp = np.array([0, 1, 1, 1, 2, 0, 2])
    macro, weighted = _manual_f1(yt, yp, range(5))  # classes 3, 4 absent: count as 0 in macro
    assert metrics.f1(yt, yp, 5, "macro") == pytest.approx(macro)
    assert metrics.f1(yt, yp, 5, "weighted") == pytest.approx(weighted)
    assert metrics.f1(yt, yp, 5, "macro") < metrics.f1(yt, yp, 3, "macro")
    s = metrics.scores(yt, yp, 5)
    assert s["acc"] == pytest.approx(5 / 7)


def test_f1_is_bitwise_scikit_learns_fixed_class_f1():
    """The bincount F1 returns exactly (==, not approx) what sklearn's f1_score returns with
    labels=range(C), zero_division=0, on random label vectors with absent and never-predicted classes."""
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    for trial in range(300):
        c = int(rng.integers(2, 12))
        n = int(rng.integers(1, 400))
        yt = rng.integers(0, max(1, c - int(rng.integers(0, 3))), n)
        yp = np.where(rng.random(n) < rng.random(), yt, rng.integers(0, c, n))
        for avg in ("weighted", "macro"):
            want = float(f1_score(yt, yp, labels=list(range(c)), average=avg, zero_division=0))
            assert metrics.f1(yt, yp, c, avg) == want, (trial, avg)


def test_empty_and_mismatched():
    assert np.isnan(metrics.accuracy([], []))
    assert np.isnan(metrics.f1([], [], 3))
    with pytest.raises(ConfigError, match="length"):
        metrics.accuracy([1, 2], [1])


def test_paired_t_interval_matches_scipy():
    a = np.array([80.1, 80.9, 79.7, 81.2, 80.4])
    b = np.array([79.2, 79.3, 78.9, 79.5, 79.0])
    iv = metrics.paired_t_interval(a, b)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low) and iv.high == pytest.approx(ref.high)
    assert iv.mean == pytest.approx((a - b).mean()) and iv.excludes_zero
    assert np.isnan(metrics.paired_t_interval([1.0], [0.0]).low)


def test_win_tie_loss():
    assert metrics.win_tie_loss([1.0, 1.005, 0.5, 2.0], [0.9, 1.0, 0.6, 2.0], tol=0.01) == (1, 2, 1)
    with pytest.raises(ConfigError):
        metrics.win_tie_loss([1], [1], tol=-1)


def test_predicted_class_entropy_is_zero_for_one_class_and_one_for_uniform():
    assert metrics.predicted_class_entropy(np.full(20, 2), 4) == 0.0  # a majority-class predictor
    assert metrics.predicted_class_entropy(np.arange(8) % 4, 4) == pytest.approx(1.0)
    # two classes of four, equally often: log 2 / log 4
    assert metrics.predicted_class_entropy(np.array([0, 1, 0, 1]), 4) == pytest.approx(0.5)
    assert np.isnan(metrics.predicted_class_entropy(np.array([], dtype=int), 4))
    with pytest.raises(ConfigError):
        metrics.predicted_class_entropy(np.zeros(3, dtype=int), 1)
