"""CNLL (Eq. 10, App. F): endpoint tests + bisection vs a dense grid argmin."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pace_nb.methods.calibration import alpha_path, blend, calibrate, cnll_alpha, risk_derivative, validation_nll
from pace_nb.core.errors import ConfigError

GRID = np.linspace(0, 1, 10001)


def _grid_alpha(zl, ze, y):
    zl, ze = zl.double(), ze.double()
    a = torch.tensor(GRID, dtype=torch.float64)[:, None, None]
    z = (1 - a) * zl[None] + a * ze[None]
    nll = -torch.log_softmax(z, -1).gather(-1, y.view(1, -1, 1).expand(len(GRID), -1, 1)).squeeze(-1).mean(-1)
    return float(GRID[int(nll.argmin())]), nll.numpy()


def _random_case(seed, n=40, c=5, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    zl = torch.randn(n, c, generator=g) * scale
    ze = torch.randn(n, c, generator=g) * scale + 2.0 * F.one_hot(y, c) * float(torch.rand(1, generator=g))
    return zl, ze, y


@pytest.mark.parametrize("seed", range(12))
def test_cnll_matches_grid_argmin_on_random_logits(seed):
    zl, ze, y = _random_case(seed)
    a = cnll_alpha(zl, ze, y)
    ga, nll = _grid_alpha(zl, ze, y)
    assert abs(a - ga) <= 1e-3 or validation_nll(zl, ze, y, a) <= nll.min() + 1e-9


def test_endpoints_and_interior():
    c = 4
    y = torch.arange(8) % c
    good = 5 * F.one_hot(y, c).float()
    bad = -good
    assert cnll_alpha(good, bad, y) == 0.0          # External is worse everywhere
    assert cnll_alpha(bad, good, y) == 1.0          # External is better everywhere
    # interior: half the nodes favour each model, optimum strictly inside
    zl = torch.cat([good[:4], torch.zeros(4, c)])
    ze = torch.cat([torch.zeros(4, c), good[4:]])
    a = cnll_alpha(zl, ze, y)
    ga, _ = _grid_alpha(zl, ze, y)
    assert 0 < a < 1 and abs(a - ga) <= 1e-3
    assert abs(risk_derivative(a, zl.double(), (ze - zl).double(), y)) < 1e-8


def test_flat_segment_returns_local_bit_for_bit():
    zl, _, y = _random_case(0)
    ze = zl.clone()
    a, z = calibrate(zl, ze, y, torch.ones(len(y), dtype=torch.bool))
    assert a == 0.0 and z is zl
    # class-constant shift of External (logit-gauge invariance, App. F): flat up to rounding
    a = cnll_alpha(zl, zl + 3.0, y)
    assert validation_nll(zl, zl + 3.0, y, a) == pytest.approx(validation_nll(zl, zl, y, 0.0), abs=1e-6)


def test_alpha_zero_and_one_are_exact():
    zl, ze, _ = _random_case(1)
    assert blend(zl, ze, 0.0) is zl and blend(zl, ze, 1) is ze
    torch.testing.assert_close(blend(zl, ze, 0.25), 0.75 * zl + 0.25 * ze)
    with pytest.raises(ConfigError, match="alpha"):
        blend(zl, ze, 1.5)


def test_derivative_matches_finite_difference():
    zl, ze, y = _random_case(5)
    h = 1e-6
    for a in (0.1, 0.5, 0.9):
        fd = (validation_nll(zl, ze, y, a + h) - validation_nll(zl, ze, y, a - h)) / (2 * h)
        assert risk_derivative(a, zl.double(), (ze - zl).double(), y) == pytest.approx(fd, abs=1e-5)


def test_bisection_derivative_is_the_formula_bit_for_bit():
    """:func:`derivative_at` (α-free parts formed once, buffers reused) returns exactly Eq. 15 formed from
    scratch in numpy, at every α the bisection may ask, so α* is the plain bisection's."""
    import numpy as np

    from pace_nb.methods.calibration import derivative_at

    def scratch(alpha, zl, d, y):
        z = zl + alpha * d
        z = z - z.max(axis=-1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=-1, keepdims=True)
        return float(((p * d).sum(axis=-1) - np.take_along_axis(d, y[:, None], axis=-1)[:, 0]).mean())

    for seed in range(4):
        zl, ze, y = (t.double().numpy() if t.is_floating_point() else t.numpy() for t in _random_case(seed))
        d = ze - zl
        at = derivative_at(zl, d, y)
        for a in np.concatenate([[0.0, 1.0], np.random.default_rng(seed).random(40)]):
            assert at(a) == scratch(a, zl, d, y)
        lo, hi = 0.0, 1.0  # the bisection of cnll_alpha on the scratch formula
        if scratch(0.0, zl, d, y) < 0 < scratch(1.0, zl, d, y):
            for _ in range(64):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if scratch(mid, zl, d, y) > 0 else (mid, hi)
            assert cnll_alpha(torch.from_numpy(zl), torch.from_numpy(ze), torch.from_numpy(y)) == 0.5 * (lo + hi)


def test_empty_validation_is_alpha_zero():
    zl, ze, y = _random_case(2)
    a, z = calibrate(zl, ze, y, torch.zeros(len(y), dtype=torch.bool))
    assert a == 0.0 and z is zl


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_logits_are_config_errors(bad):
    zl, ze, y = _random_case(3)
    ze[3, 1] = bad
    with pytest.raises(ConfigError, match="NaN/inf"):
        cnll_alpha(zl, ze, y)
    with pytest.raises(ConfigError, match="NaN/inf"):
        calibrate(ze, zl, y, torch.ones(len(y), dtype=torch.bool))


def test_alpha_path_minimum_is_cnll_alpha():
    zl, ze, y = _random_case(7, n=60)
    val = torch.arange(60) < 30
    path = alpha_path(zl, ze, y, val, ~val, num=1001)
    assert list(path.columns) == ["alpha", "val_nll", "val_acc", "test_acc"]
    a = cnll_alpha(zl[val], ze[val], y[val])
    assert abs(path["alpha"][path["val_nll"].idxmin()] - a) <= 1e-3 or path["val_nll"].min() >= validation_nll(
        zl[val], ze[val], y[val], a) - 1e-9
    assert path["test_acc"].between(0, 1).all()
