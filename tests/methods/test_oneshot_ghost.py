"""GHOST (pace_nb.methods.oneshot.ghost): its losses against independent computations and the
released mechanism — generated data only at the server, class-balanced labels, 3 × 5 visits."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

from pace_nb.methods.oneshot import base, ghost, make_oneshot, run_oneshot
from pace_nb.nn.gcn import init_params


@pytest.fixture(scope="module")
def fg_skew():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="dirichlet", num_clients=10, seed=2024, beta=0.05)


SMALL = {"gen_steps": 3}


# ----------------------------------------------------------------------------- pure functions
def test_defaults_are_the_released_args():
    cfg = make_oneshot("ghost").cfg
    assert (cfg.gen_steps, cfg.gen_lr, cfg.gen_weight_decay, cfg.noise_dim) == (100, 0.005, 4e-4, 64)
    assert (cfg.lambda_d, cfg.lambda_f, cfg.fgw_alpha, cfg.knn) == (0.05, 0.1, 0.5, 5)
    assert (cfg.visits, cfg.visit_steps, cfg.lambda_r, cfg.gen_dropout) == (3, 5, 1e-11, 0.2)
    assert not any("replay" in f for f in vars(cfg))


def test_balanced_labels_counts_and_order():
    g = torch.Generator().manual_seed(0)
    y = ghost.balanced_labels(23, 4, g)
    assert torch.bincount(y, minlength=4).tolist() == [5, 5, 5, 8]
    y2 = ghost.balanced_labels(23, 4, torch.Generator().manual_seed(1))
    assert sorted(y.tolist()) == sorted(y2.tolist()) and not torch.equal(y, y2)  # shuffled


def test_feature_loss_by_hand():
    pred = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    real = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    kl = 0.0
    for p_row, r_row in zip(pred.tolist(), real.tolist(), strict=True):
        zp, zr = sum(math.exp(v) for v in p_row), sum(math.exp(v) for v in r_row)
        kl += sum(math.exp(r) / zr * (r - math.log(zr) - (p - math.log(zp))) for p, r in zip(p_row, r_row, strict=True))
    cos = (0.0 + 1.0) / 2  # cos((1,0),(0,1)) = 0, cos((0,2),(0,1)) = 1
    assert ghost.feature_loss(pred, real, 0.05).item() == pytest.approx(0.05 * kl / 2 + 1 - cos, rel=1e-6)


def _objective(A, B, M, T, alpha):
    """FGW objective at coupling T by explicit sums (independent of POT)."""
    n, m = len(A), len(B)
    gw = sum((A[i][k] - B[j][l]) ** 2 * T[i][j] * T[k][l]
             for i, k in itertools.product(range(n), repeat=2) for j, l in itertools.product(range(m), repeat=2))
    return (1 - alpha) * sum(M[i][j] * T[i][j] for i in range(n) for j in range(m)) + alpha * gw


def test_fgw_zero_for_identical_and_bounded_positive_otherwise():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(5, 3, generator=g)
    path = ghost.dense_adjacency(torch.tensor([[0, 1, 2, 3, 1, 2, 3, 4], [1, 2, 3, 4, 0, 1, 2, 3]]), 5)
    star = ghost.dense_adjacency(torch.tensor([[0, 0, 0, 0, 1, 2, 3, 4], [1, 2, 3, 4, 0, 0, 0, 0]]), 5)
    full = 1.0 - torch.eye(5)
    assert ghost.fgw_loss(path, path.clone(), x, x.clone()).item() == pytest.approx(0.0, abs=1e-10)
    alpha = 0.5
    for other in (star, full):
        val = ghost.fgw_loss(path, other, x, x.clone(), alpha).item()
        M = (torch.cdist(x.double(), x.double()) ** 2).numpy()
        A, B = path.double().numpy(), other.double().numpy()
        # upper bound: the identity coupling; lower bound: GW ≥ (‖A‖_p − ‖B‖_q)² plus the exact OT of M
        upper = _objective(A.tolist(), B.tolist(), M.tolist(), (np.eye(5) / 5).tolist(), alpha)
        r, c = linear_sum_assignment(M)
        lower = alpha * (math.sqrt((A ** 2).sum() / 25) - math.sqrt((B ** 2).sum() / 25)) ** 2 + (1 - alpha) * M[r, c].sum() / 5
        assert lower - 1e-9 <= val <= upper + 1e-9
        if other is full:  # different edge counts → strictly positive
            assert lower > 0.01


def test_fgw_gradient_reaches_the_generated_features():
    g = torch.Generator().manual_seed(4)
    a = ghost.dense_adjacency(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), 3)
    xr = torch.rand(3, 4, generator=g)
    xp = torch.rand(3, 4, generator=g).requires_grad_(True)
    ghost.fgw_loss(a, a.clone(), xr, xp).backward()
    assert xp.grad is not None and torch.isfinite(xp.grad).all() and xp.grad.abs().sum() > 0


def test_induced_adjacency_matches_dense_slice():
    ei = torch.tensor([[0, 1, 2, 3, 4, 1], [1, 0, 3, 2, 0, 4]])
    mask = torch.tensor([True, True, False, True, True])
    full = ghost.dense_adjacency(ei, 5)
    assert torch.equal(ghost.induced_adjacency(ei, mask), full[mask][:, mask])


def test_proxy_edges_count_the_node_itself():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    ei = ghost.proxy_edges(x, 2)  # top-2 counting itself = one neighbour
    assert sorted(map(tuple, ei.T.tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]


def test_topology_criterion_against_a_per_edge_loop():
    from pace_nb.nn.gcn import propagation_matrix

    theta = init_params(6, 3, 4, seed=1)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 6, generator=g)
    ei = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    omega = ghost.topology_criterion(theta, x, ei)
    assert set(omega) == {"conv1.weight", "conv1.bias"}
    th = {k: v.clone().requires_grad_(True) for k, v in theta.items()}
    h = F.relu(propagation_matrix(ei, 5).to_dense() @ x @ th["conv1.weight"].T + th["conv1.bias"])
    total = torch.zeros(())
    for i, j in ei.T.tolist() + [(v, v) for v in range(5)] * 2:  # edges + the self loops listed twice
        total = total + (((h[i] @ th["conv1.weight"]) * torch.tanh(h[j] @ th["conv1.weight"])).sum()) ** 2
    total.backward()
    for k in omega:
        assert torch.allclose(omega[k], th[k].grad, rtol=1e-5, atol=1e-6)


def test_retention_penalty_by_hand():
    theta = {"w": torch.tensor([2.0, 0.0])}
    anchors = [{"w": torch.tensor([1.0, 1.0])}, {"w": torch.tensor([0.0, 0.0])}]
    criteria = [{"w": torch.tensor([-1.0, 0.5])}, {"w": torch.tensor([2.0, 3.0])}]
    expected = (1 * 1 + 0.5 * 1) + (2 * 4 + 0)
    assert ghost.retention_penalty(theta, anchors, criteria).item() == pytest.approx(expected)


# ----------------------------------------------------------------------------- the mechanism
def _messages(fg, method, ctx):
    blobs = [base.encode(method.client_message(ctx, k, c)) for k, c in enumerate(fg.clients) if bool(c.train_mask.any())]
    return blobs, [base.decode(b) for b in blobs]


def test_server_sees_only_generated_balanced_graphs_on_a_3x5_schedule(fg_skew, monkeypatch):
    from pace_nb.nn.training import TrainConfig

    method = make_oneshot("ghost", **SMALL)
    ctx = base.OneShotContext(fg_skew, 0, TrainConfig(), torch.device("cpu"))
    blobs, messages = _messages(fg_skew, method, ctx)
    for m in messages:  # the upload: generator weights and the node count, nothing else
        assert set(m) - {"nodes"} and all(k.startswith("generator.") for k in m if k != "nodes")
    sampled, labels, forwards = [], [], []
    real_sample = ghost.ProxyGenerator.sample
    real_labels, real_forward = ghost.balanced_labels, ghost.gcn_forward

    def sample(self, y, rng):
        out = real_sample(self, y, rng)
        sampled.append(out)
        return out

    def lab(n, c, rng):
        y = real_labels(n, c, rng)
        labels.append(y)
        return y

    def fwd(theta, x, P, **kw):
        forwards.append(x)
        return real_forward(theta, x, P, **kw)

    monkeypatch.setattr(ghost.ProxyGenerator, "sample", sample)
    monkeypatch.setattr(ghost, "balanced_labels", lab)
    monkeypatch.setattr(ghost, "gcn_forward", fwd)
    method.server_train(ctx, messages, method.synthesize(ctx, messages))
    n_clients = len(messages)
    assert len(labels) == len(sampled) == 3 * n_clients and len(forwards) == 3 * 5 * n_clients
    # every optimisation step trains on the current visit's generated features (no replay, no real data)
    for t, x in enumerate(forwards):
        assert x is sampled[t // 5]
    # each client visited once, 3 consecutive times, with as many class-balanced nodes as it holds
    sizes = [len(y) for y in labels]
    expected_sizes = sorted(int(c.num_nodes) for c in fg_skew.clients if bool(c.train_mask.any()))
    assert sorted(sizes[::3]) == expected_sizes and all(sizes[i] == sizes[i - i % 3] for i in range(len(sizes)))
    c = fg_skew.num_classes
    for y in labels:
        counts = torch.bincount(y, minlength=c)
        assert (counts[:-1] == len(y) // c).all() and int(counts[-1]) == len(y) - (c - 1) * (len(y) // c)


def test_uploads_are_real_bytes_and_runs_repeat(fg_skew):
    a = run_oneshot(fg_skew, make_oneshot("ghost", **SMALL), (5,), progress=False)[0]
    b = run_oneshot(fg_skew, make_oneshot("ghost", **SMALL), (5,), progress=False)[0]
    assert a["acc"] == b["acc"] and a["bytes_up"] == b["bytes_up"]
    gen = ghost.ProxyGenerator(64, fg_skew.num_features, fg_skew.num_classes, 0.2, 0)
    n_floats = sum(p.numel() for p in gen.parameters()) + 1
    params = json.loads(a["params"]) if isinstance(a["params"], str) else a["params"]
    sent = [int(v) for v in params["bytes_per_client"] if v]
    assert len(sent) == sum(bool(c.train_mask.any()) for c in fg_skew.clients)
    assert len(set(sent)) == 1 and 4 * n_floats < sent[0] < 4 * n_floats + 4096
    assert a["bytes_up"] == sum(sent)
    assert a["bytes_down"] == 0 and a["receiver"] == -1


def test_bad_hyperparameter_is_a_clear_error():
    from pace_nb.core.errors import ConfigError

    with pytest.raises(ConfigError, match="visits"):
        make_oneshot("ghost", visits=-1)
    with pytest.raises(ConfigError, match="unknown parameter"):
        make_oneshot("ghost", replay=True)


def test_fgw_in_float32_is_the_float64_value_to_single_precision():
    """The released code's float32 FGW against the float64 solve (GHOST's default): the same
    distance to single precision, a float32 gradient, and a clear error for other precisions."""
    g = torch.Generator().manual_seed(5)
    n, m = 30, 24
    a = ghost.dense_adjacency(torch.randint(0, n, (2, 80), generator=g), n)
    b = ghost.dense_adjacency(ghost.proxy_edges(torch.rand(m, 6, generator=g), 5), m)
    xr, xp = torch.rand(n, 6, generator=g), torch.rand(m, 6, generator=g).requires_grad_(True)
    v32 = ghost.fgw_loss(a, b, xr, xp, 0.5, torch.float32)
    v64 = ghost.fgw_loss(a, b, xr, xp, 0.5, torch.float64)
    assert v32.dtype == torch.float32
    assert float(v32) == pytest.approx(float(v64), rel=1e-4)
    v32.backward()
    assert xp.grad is not None and torch.isfinite(xp.grad).all()
    from pace_nb.core.errors import ConfigError
    assert ghost.Ghost().cfg.fgw_dtype == "float64" and ghost.Ghost(fgw_dtype="float32").cfg.fgw_dtype == "float32"
    with pytest.raises(ConfigError, match="fgw_dtype"):
        ghost.Ghost(fgw_dtype="float16")
