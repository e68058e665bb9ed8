"""Collaborative baselines: server rules by hand, local terms against autograd, the mechanism.

Fast: the federated graphs here are small demo SBM graphs split by hand into 3 clients.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pace_nb.methods.baselines import make_method, method_names, run_federated, train_federated
from pace_nb.methods.registry import group
from pace_nb.methods.baselines.base import mix, size_weights
from pace_nb.methods.baselines.fedgta import accept_weights, client_statistics, confidence, moments
from pace_nb.methods.baselines.fednova import fednova_update
from pace_nb.methods.baselines.fedopt import adam_server_step
from pace_nb.methods.baselines.fedprox import proximal_term
from pace_nb.methods.baselines.fedproto import aggregate_prototypes, class_prototypes
from pace_nb.methods.baselines.fedpub import proxy_graph, prune_masks, similarity_weights
from pace_nb.methods.baselines.fedrcl import rcl_loss
from pace_nb.methods.baselines.fedtad import class_reliability, landing_probabilities
from pace_nb.methods.baselines.moon import moon_loss
from pace_nb.core.errors import ConfigError, PaceNBError, UnknownNameError
from pace_nb.nn.training import TrainConfig, train_local

from demo_graphs import SEED, demo_fg
from synthetic import fed_context as _ctx, rand_params as _rand_params


@pytest.fixture(scope="module")
def fg():
    return demo_fg()


CFG = TrainConfig(epochs=10)


@pytest.fixture(scope="module")
def local(fg):
    return train_local(fg, (SEED,), CFG, device="cpu", progress=False)


# ----------------------------------------------------------------------------- server rules


def test_fedavg_weights_are_node_shares(fg):
    ctx = _ctx(fg)
    sizes = [c.num_nodes for c in fg.clients]
    trained = _rand_params(3)
    out = make_method("fedavg").aggregate(ctx, trained, {})
    p = np.array(sizes, dtype=float) / sum(sizes)
    expect = sum(p[j] * trained["conv1.weight"][j].numpy() for j in range(3))
    for i in range(3):
        np.testing.assert_allclose(out["conv1.weight"][i].numpy(), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(size_weights(torch.tensor([1.0, 3.0])).numpy(), [0.25, 0.75])
    with pytest.raises(ConfigError):
        size_weights(torch.tensor([0.0, 0.0]))


def test_mix_is_per_seed_personalized():
    trained = _rand_params(4)  # 2 seeds × 2 clients
    w = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [1.0, 0.0]]])
    out = mix(trained, w, 2, 2)
    v = trained["conv2.bias"]
    torch.testing.assert_close(out["conv2.bias"], torch.stack([v[0], 0.5 * (v[0] + v[1]), v[3], v[2]]))


def test_fedprox_gradient_is_mu_times_drift():
    torch.manual_seed(0)
    w = torch.randn(2, 3, 4, requires_grad=True)
    wg = torch.randn(2, 3, 4)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    mu = 0.3
    loss = sum(F.cross_entropy(x @ w[b].t(), y) for b in range(2)) + proximal_term({"w": w}, {"w": wg}, mu, ["w"])
    (g,) = torch.autograd.grad(loss, w)
    w2 = w.detach().clone().requires_grad_(True)
    (g_ce,) = torch.autograd.grad(sum(F.cross_entropy(x @ w2[b].t(), y) for b in range(2)), w2)
    torch.testing.assert_close(g, g_ce + mu * (w.detach() - wg))


@pytest.mark.parametrize("ragged", [True, False])
def test_fedprox_fused_gradient_is_autograds_bit_for_bit(fg, ragged):
    """The trainer's added ``μ (θ − θ_a)`` trains the models bitwise as autograd's gradient of
    :func:`proximal_term` does (all four keys, conv1 stored transposed; two chunks)."""
    from pace_nb.nn.training import train_models

    ctx = _ctx(fg)
    keys = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias")
    anchor = {k: v + 0.25 * torch.randn(v.shape, generator=torch.Generator().manual_seed(3)) for k, v in ctx.start.items()}
    mu, b = 0.37, ctx.start["conv1.weight"].shape[0]
    common = dict(config=CFG, device="cpu", progress=False, ragged=ragged, max_batch=2)
    args = (fg.clients, ctx.start, [11 + i for i in range(b)], ctx.client_of)

    def hook(step):
        return proximal_term(step.params, {k: v[step.models] for k, v in anchor.items()}, mu, keys)

    ref, _ = train_models(*args, extra_loss=hook, **common)
    fused, _ = train_models(*args, proximal=(mu, anchor), **common)
    plain, _ = train_models(*args, **common)
    for k in keys:
        assert torch.equal(fused[k], ref[k]), k
    assert not torch.equal(fused["conv1.weight"], plain["conv1.weight"])  # the term acts


def test_fedprox_trains_toward_the_received_model(fg):
    """FedProx's local objective is CE + μ/2‖θ − W_g‖² with W_g the round's start (the trainer's
    proximal anchors): large μ keeps the trained models near the start, μ = 0 is plain CE."""
    ctx = _ctx(fg)
    assert make_method("fedprox", mu=0.5).proximal(ctx) == 0.5
    assert not make_method("fedprox", mu=0.5).plain_local(ctx) and make_method("fedprox", mu=0.0).plain_local(ctx)
    runs = {mu: train_federated(fg, "fedprox", seeds=(SEED,), config=CFG, device="cpu", progress=False,
                                method_params={"mu": mu}) for mu in (0.0, 100.0)}
    w0 = ctx.start["conv2.weight"][:1]
    drift = {mu: float((r.trained["conv2.weight"] - w0).norm()) for mu, r in runs.items()}
    assert drift[100.0] < 0.5 * drift[0.0]


def test_fednova_normalization_by_hand():
    deltas = torch.tensor([[2.0, 4.0], [3.0, -3.0], [8.0, 0.0]])
    taus = torch.tensor([1.0, 3.0, 4.0])
    p = torch.tensor([0.5, 0.25, 0.25])
    tau_eff = 0.5 * 1 + 0.25 * 3 + 0.25 * 4  # 2.25
    d = 0.5 * deltas[0] / 1 + 0.25 * deltas[1] / 3 + 0.25 * deltas[2] / 4
    torch.testing.assert_close(fednova_update(deltas, taus, p), tau_eff * d)
    # equal step counts → FedAvg's update
    torch.testing.assert_close(fednova_update(deltas, torch.full((3,), 7.0), p), (p[:, None] * deltas).sum(0))


def test_fednova_train_tau_differs_from_fedavg(fg):
    ctx = _ctx(fg)
    trained = {k: ctx.start[k] + torch.randn_like(ctx.start[k]) for k in ctx.start}
    steps = make_method("fednova").aggregate(ctx, trained, {})
    avg = make_method("fedavg").aggregate(ctx, trained, {})
    torch.testing.assert_close(steps["conv1.weight"], avg["conv1.weight"], rtol=1e-5, atol=1e-5)
    tr = make_method("fednova", tau="train").aggregate(ctx, trained, {})
    assert not torch.allclose(tr["conv1.weight"], avg["conv1.weight"])


def test_fedpub_similarity_weights():
    e = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]])
    w = similarity_weights(e, 10.0)
    cos = np.array([[1, 1 / math.sqrt(2), 0], [1 / math.sqrt(2), 1, -1 / math.sqrt(2)], [0, -1 / math.sqrt(2), 1]])
    expect = np.exp(10 * cos)
    expect /= expect.sum(1, keepdims=True)
    np.testing.assert_allclose(w.numpy(), expect, rtol=1e-10)
    np.testing.assert_allclose(w.sum(1).numpy(), 1.0)


def test_fedpub_l1_carries_no_gradient_and_pruning(fg):
    """OpenFGL computes FedPub's L1 mask term on detached state: it must not move the masks."""
    ctx = _ctx(fg)
    m = make_method("fedpub", l1=0.01)
    start = m.start_models(ctx, ctx.start)
    for name in ("conv1", "conv2", "lin"):
        assert torch.equal(start[f"{name}.mask"], torch.ones_like(start[f"{name}.weight"]))
    assert start["conv2.weight"].shape[1:] == (64, 64) and start["lin.weight"].shape[1:] == (fg.num_classes, 64)
    params = {k: v.clone().requires_grad_(True) for k, v in start.items()}

    class Step:
        pass

    step = Step()
    step.params, step.models = params, [0, 1, 2]
    loss = m.local_loss(step, ctx)
    assert float(loss) == 0.0 and not loss.requires_grad  # round 1: no L1 gradient, no proximal term
    pr = prune_masks({"conv1.mask": torch.tensor([0.005, -0.5, 0.0])}, 0.01)
    assert pr["conv1.mask"].tolist() == [0.0, -0.5, 0.0]
    x, P = proxy_graph(7, 1)
    x2, P2 = proxy_graph(7, 1)
    assert x.shape == (500, 7) and torch.equal(x, x2) and torch.equal(P.to_dense(), P2.to_dense())


def test_fedpub_personalized_return_keeps_own_masks(fg):
    ctx = _ctx(fg)
    m = make_method("fedpub")
    m.prepare(ctx)
    trained = m.start_models(ctx, {k: v + 0.1 * torch.randn_like(v) for k, v in ctx.start.items()})
    trained["conv1.mask"] = trained["conv1.mask"] * torch.tensor([1.0, 2.0, 3.0]).view(3, 1, 1)
    stats = m.upload(ctx, trained)
    out = m.aggregate(ctx, trained, stats)
    w = ctx.state["weights"][0]
    torch.testing.assert_close(out["conv2.bias"], (w.float() @ trained["conv2.bias"]))
    torch.testing.assert_close(out["conv1.mask"], trained["conv1.mask"])


def test_fedgta_moments_confidence_and_accept_rule():
    x = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    m = moments(x, 2, "hybrid")
    torch.testing.assert_close(m[0], torch.tensor([0.5, 0.5]))  # raw 1st
    torch.testing.assert_close(m[1], torch.tensor([1.25 / 3, 1.25 / 3]))  # raw 2nd
    torch.testing.assert_close(m[2], torch.zeros(2))  # central 1st
    torch.testing.assert_close(m[3], torch.tensor([0.5 / 3, 0.5 / 3]))  # central 2nd
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    deg = torch.tensor([2.0, 4.0], dtype=torch.float64)
    expect = 6 * 2 * math.exp(-1) + 4 * 2 * 0.5 * math.log(0.5 + 1e-8) + 2 * math.log(1 + 1e-8)
    assert float(confidence(p, deg)) == pytest.approx(expect)
    mom = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.2]])
    w = accept_weights(mom, torch.tensor([1.0, 2.0, 3.0]), 0.5)
    # cos(0,1)=0.707 > .5 accepted; cos(0,2) < 0; cos(1,2) < 0
    np.testing.assert_allclose(w.numpy(), [[1 / 3, 2 / 3, 0], [1 / 3, 2 / 3, 0], [0, 0, 1]], rtol=1e-10)


def test_fedgta_client_statistics_on_hand_graph():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0-1-2
    y = torch.tensor([0, 1, 1])
    tm = torch.tensor([True, False, False])
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    mom, conf = client_statistics(logits, ei, y, tm, 2, prop_steps=1, lp_alpha=0.5, temperature=20.0, num_moments=1,
                                  kind="raw")
    # LP seeds only node 0 with its softmax; after one step node 1 gets 0.5 * (1/sqrt(1*2)) * p0
    p0 = torch.softmax(logits[0].double(), 0)
    out = torch.zeros(3, 2, dtype=torch.float64)
    out[0] = 0.5 * p0
    out[1] = 0.5 * p0 / math.sqrt(2)
    raw = torch.softmax(out, 1)
    raw[0] = torch.tensor([1.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(mom, raw.mean(0))
    assert float(conf) > 0


def test_fedproto_averages_over_holders_only():
    protos = torch.tensor([[[1.0, 1.0], [0.0, 0.0]], [[3.0, 3.0], [5.0, 7.0]]])  # client 0 lacks class 1
    counts = torch.tensor([[1.0, 0.0], [3.0, 2.0]])
    g, held = aggregate_prototypes(protos, counts)
    torch.testing.assert_close(g, torch.tensor([[2.5, 2.5], [5.0, 7.0]]))
    assert held.tolist() == [True, True]
    p, n = class_prototypes(torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]]), torch.tensor([0, 0, 2]), 3)
    torch.testing.assert_close(p, torch.tensor([[2.0, 1.0], [0.0, 0.0], [5.0, 5.0]]))
    assert n.tolist() == [2.0, 0.0, 1.0]


def test_moon_loss_by_hand():
    z = torch.tensor([[1.0, 0.0]])
    zg = torch.tensor([[1.0, 1.0]])
    zp = torch.tensor([[0.0, 1.0]])
    a, b = (1 / math.sqrt(2)) / 0.5, 0.0
    expect = -math.log(math.exp(a) / (math.exp(a) + math.exp(b)))
    assert float(moon_loss(z, zg, zp, 0.5)) == pytest.approx(expect)


def test_fedadam_server_step_by_hand():
    x, d = torch.tensor([1.0, -1.0]), torch.tensor([0.2, -0.4])
    m0, v0 = torch.tensor([0.1, 0.0]), torch.tensor([0.01, 0.0])
    x1, m1, v1 = adam_server_step(x, d, m0, v0, lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
    m_ = 0.9 * m0 + 0.1 * d
    v_ = 0.99 * v0 + 0.01 * d * d
    torch.testing.assert_close(m1, m_)
    torch.testing.assert_close(v1, v_)
    torch.testing.assert_close(x1, x + 0.1 * m_ / (v_.sqrt() + 1e-3))


def test_fedtad_reliability_by_hand():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    y = torch.tensor([0, 1, 1])
    tm = torch.tensor([True, True, False])
    ckr = class_reliability(x, ei, y, tm, 2, max_walk_length=2)
    lp = landing_probabilities(ei, 3, 2)
    emb = F.normalize(torch.cat([x.double(), lp], 1), dim=1)
    cos01, cos12 = float(emb[0] @ emb[1]), float(emb[1] @ emb[2])
    r0, r1 = (1 + cos01) / 2, (1 + cos01 + cos12) / 3
    np.testing.assert_allclose(ckr.numpy(), [r0 / (r0 + r1), r1 / (r0 + r1)], rtol=1e-10)
    # landing probabilities: T = D^-1(A+I) on the path; diag(T) = [1/2, 1/3, 1/2]
    np.testing.assert_allclose(lp[:, 0].numpy(), [0.5, 1 / 3, 0.5])


def test_fedtad_edge_cosines_match_the_gathered_normalized_embeddings():
    """The sparse row products equal the dense definition (normalize [x ‖ topo], gather both ends, dot),
    with all-zero rows (F.normalize's eps) and repeated edges."""
    from pace_nb.methods.baselines.fedtad import edge_cosines

    g = torch.Generator().manual_seed(3)
    x = torch.rand(40, 30, generator=g) * (torch.rand(40, 30, generator=g) < 0.1)
    x[5] = 0.0
    topo = torch.rand(40, 4, generator=g, dtype=torch.float64)
    topo[5] = 0.0
    ei = torch.randint(0, 40, (2, 300), generator=g)
    ei[:, :3] = torch.tensor([[5, 5, 1], [1, 5, 1]])
    emb = F.normalize(torch.cat([x.double(), topo], 1), dim=1)
    want = (emb[ei[0]] * emb[ei[1]]).sum(1)
    got = edge_cosines(x, topo, ei)
    assert got.dtype == torch.float64 and got.shape == (300,)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)


def test_fedtad_diversity_and_no_distillation_is_fedavg(fg):
    from pace_nb.methods.baselines.fedtad import diversity_loss

    g = torch.Generator().manual_seed(0)
    z, o = torch.randn(6, 3, generator=g), torch.randn(6, 5, generator=g)
    expect = torch.exp(-((z[None] - z[:, None]).pow(2).mean(-1) * (o[None] - o[:, None]).abs().mean(-1)).mean())
    torch.testing.assert_close(diversity_loss(z, o), expect)
    ctx = _ctx(fg)
    trained = {k: v + 0.1 * torch.randn_like(v) for k, v in ctx.start.items()}
    tad = make_method("fedtad", glb_epochs=0)
    tad.prepare(ctx)
    out = tad.aggregate(ctx, trained, tad.upload(ctx, trained))
    avg = make_method("fedavg").aggregate(ctx, trained, {})
    for k in avg:
        torch.testing.assert_close(out[k], avg[k])


def test_rcl_loss_by_hand():
    """Released FedRCL loss on a 4-sample toy batch, term by term with numpy loops."""
    f = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-0.6, 0.8]])
    y = torch.tensor([0, 0, 1, 1])
    tau, lam = 0.5, 0.7
    u = f.numpy() / np.linalg.norm(f.numpy(), axis=1, keepdims=True)
    s = u @ u.T
    total_scl, total_relax = 0.0, 0.0
    for i in range(4):
        same = [j for j in range(4) if y[j] == y[i]]
        other = sorted((s[i, j] for j in range(4) if y[j] != y[i]), reverse=True)[:2]
        p = min(s[i, j] for j in same)  # hardest positive (self included)
        logits = np.array([p] + other) / tau
        total_scl += -(logits[0] - np.log(np.exp(logits).sum()))
        q = min(s[i, j] for j in same if j != i)
        q = q if q >= lam else -1.0
        pair = np.array([s[i, i], q]) / tau
        total_relax += -(pair[0] - np.log(np.exp(pair).sum()))
    expect = total_scl / 4 + total_relax / 4
    assert float(rcl_loss(f, y, tau, lam)) == pytest.approx(expect, rel=1e-5)
    # s(0,1) = 0.8 >= 0.7 is relaxed; s(2,3) = 0.8 too: lowering the threshold above 0.8 removes both
    no_relax = total_scl / 4 + 4 * (np.log(np.exp(2.0) + np.exp(-2.0)) - 2.0) / 4
    assert float(rcl_loss(f, y, tau, 0.9)) == pytest.approx(no_relax, rel=1e-5)
    # a lone class-0 anchor: its positive is itself, its negatives the two most similar others
    lone = rcl_loss(f[[0, 2, 3]], torch.tensor([0, 1, 1]), tau, lam)
    assert math.isfinite(float(lone))


def _dense_rcl(feat, y, tau, threshold, topk_neg, relax_weight):
    """FedRCL's loss written densely (masked n × n similarities, autograd through min/top-k)."""
    n = feat.shape[0]
    f = torch.nn.functional.normalize(feat, dim=1)
    s = f @ f.t()
    same = y.view(-1, 1) == y.view(1, -1)
    eye = torch.eye(n, dtype=torch.bool)
    pos = s.masked_fill(~same, float("inf")).min(dim=1, keepdim=True).values
    neg = s.masked_fill(same, float("-inf")).topk(min(topk_neg, n), dim=1).values
    scl = torch.logsumexp(torch.cat([pos, neg], 1) / tau, dim=1) - pos.squeeze(1) / tau
    q = s.masked_fill(~same | eye, float("inf")).min(dim=1, keepdim=True).values
    q = torch.where(torch.isinf(q) | (q < threshold), torch.full_like(q, -1.0), q)
    d = torch.diagonal(s).unsqueeze(1)
    relax = torch.logsumexp(torch.cat([d, q], 1) / tau, dim=1) - d.squeeze(1) / tau
    return scl.mean() + relax_weight * relax.mean()


@pytest.mark.parametrize("threshold,topk", [(0.7, 2), (-0.2, 3), (0.1, 40)])
def test_rcl_loss_equals_the_dense_formulation_batched(threshold, topk):
    """Value and gradient of the selected-pair loss equal the dense masked formulation, per model of a
    stacked [S, n, d] batch (a singleton class, a class of two, missing negatives when k > n − 1)."""
    g = torch.Generator().manual_seed(3)
    y = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3, 0, 1, 1, 0, 3, 0])
    feat = torch.randn(3, len(y), 5, generator=g) + 0.8 * torch.randn(4, 5, generator=g)[y]
    feat[:, 8], feat[:, 11] = feat[:, 1], 2 * feat[:, 1]  # exact ties among class 0: the first index wins, as dense
    a = feat.clone().requires_grad_(True)
    out = rcl_loss(a, y, 0.3, threshold, topk, 0.6)
    assert out.shape == (3,)
    out.sum().backward()
    for s in range(3):
        b = feat[s].clone().requires_grad_(True)
        ref = _dense_rcl(b, y, 0.3, threshold, topk, 0.6)
        ref.backward()
        assert float(out[s].detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
        torch.testing.assert_close(a.grad[s], b.grad, rtol=1e-4, atol=1e-6)
    assert float(rcl_loss(feat[0, :0], y[:0])) == 0.0  # no training nodes: no loss


def test_fedaux_factorized_kernel_matches_dense_and_weights_use_aux(fg):
    from pace_nb.methods.baselines.fedaux import kernel_smooth

    g = torch.Generator().manual_seed(0)
    h, a = torch.randn(40, 6, generator=g).relu(), torch.randn(6, generator=g)
    for sigma in (0.5, 1.0, 10.0):
        s = F.cosine_similarity(h, a.unsqueeze(0), dim=-1)
        k = torch.exp(-(s[:, None] - s[None, :]) ** 2 / sigma**2)
        torch.testing.assert_close(kernel_smooth(h, a, sigma), k @ h / k.sum(1, keepdim=True), rtol=1e-5, atol=1e-5)
    from pace_nb.methods.baselines.fedaux import kernel_features, taylor_order

    grid = torch.linspace(-1, 1, 201, dtype=torch.float64)  # the truncation alone, in float64
    for sigma in (0.5, 1.0, 3.0):
        phi = kernel_features(grid, sigma, taylor_order(sigma))
        dense = torch.exp(-(grid[:, None] - grid[None, :]) ** 2 / sigma**2)
        assert float(((phi @ phi.T - dense) / dense).abs().max()) <= 2.0**-23
        short = kernel_features(grid, sigma, taylor_order(sigma) - 2)  # and the order is not larger than needed
        assert float(((short @ short.T - dense) / dense).abs().max()) > 2.0**-24
    hs, as_ = torch.randn(3, 40, 6, generator=g).relu(), torch.randn(3, 6, generator=g)  # a stack of 3 models
    for s_ in range(3):
        torch.testing.assert_close(kernel_smooth(hs, as_)[s_], kernel_smooth(hs[s_], as_[s_]), rtol=1e-5, atol=1e-6)
    ctx = _ctx(fg)
    m = make_method("fedaux1r", similarity="aux", head="aux")
    start = m.start_models(ctx, ctx.start)
    assert torch.equal(start["aux"][0], start["aux"][2])  # a0 shared through the global model
    trained = dict(start)
    trained["aux"] = torch.tensor([[1.0] + [0.0] * 63, [1.0, 1.0] + [0.0] * 62, [0.0, -1.0] + [0.0] * 62])
    out = m.aggregate(ctx, trained, {})
    torch.testing.assert_close(ctx.state["weights"][0], similarity_weights(trained["aux"], 10.0))
    torch.testing.assert_close(out["aux"], (ctx.state["weights"][0].float() @ trained["aux"]))


def test_fedaux_smoothed_projection_is_the_smoothed_hidden_layer_projected():
    """``smoothed_projection`` (κ (h Wᵀ) / κ1, one product for the projection and the score) against
    ``kernel_smooth(h, a) @ Wᵀ`` and the dense kernel: values and gradients (h, a, W), stack and list."""
    from pace_nb.methods.baselines.fedaux import kernel_smooth, smoothed_projection

    g = torch.Generator().manual_seed(6)
    h0, a0, w0 = torch.randn(3, 50, 8, generator=g).relu(), torch.randn(3, 8, generator=g), torch.randn(3, 4, 8, generator=g)
    h0[2, :3] = 0.0  # dead rows
    up = torch.randn(3, 50, 4, generator=g)
    out = []
    for fn in (lambda h, a, w: smoothed_projection(h, a, w, 0.7),
               lambda h, a, w: smoothed_projection(list(h.unbind(0)), a, w, 0.7),
               lambda h, a, w: kernel_smooth(h, a, 0.7) @ w.transpose(1, 2)):
        h, a, w = (t.clone().requires_grad_(True) for t in (h0, a0, w0))
        v = fn(h, a, w)
        (v * up).sum().backward()
        out.append((v.detach(), h.grad, a.grad, w.grad))
    for got in out[:2]:
        for x, ref in zip(got, out[2], strict=True):
            torch.testing.assert_close(x, ref, rtol=1e-4, atol=1e-5)
    s = F.cosine_similarity(h0[0], a0[0].unsqueeze(0), dim=-1)
    k = torch.exp(-(s[:, None] - s[None, :]) ** 2 / 0.7**2)
    torch.testing.assert_close(out[0][0][0], (k @ h0[0] / k.sum(1, keepdim=True)) @ w0[0].t(), rtol=1e-4, atol=1e-5)


def test_fedaux_kernel_features_closed_form_gradient_and_transposed_ce():
    """φ(s)'s closed-form backward passes gradcheck (float64) and matches autograd through the running
    product; ``_summed_ce`` (log-softmax over a leading class axis) has cross-entropy's value and gradient."""
    from pace_nb.methods.baselines.fedaux import _features, _summed_ce, kernel_features

    s = torch.linspace(-1, 1, 41, dtype=torch.float64).requires_grad_(True)
    for sigma, order in ((0.7, 12), (1.0, 15), (3.0, 4)):
        assert torch.autograd.gradcheck(lambda x, sg=sigma, m=order: kernel_features(x, sg, m), (s,))
    g = torch.Generator().manual_seed(8)
    s0, up = torch.rand(3, 30, generator=g) * 2 - 1, torch.randn(3, 30, 16, generator=g)
    a, b = s0.clone().requires_grad_(True), s0.clone().requires_grad_(True)
    (kernel_features(a, 1.0, 15) * up).sum().backward()
    (_features(b, 1.0, 15) * up).sum().backward()
    assert torch.equal(kernel_features(s0, 1.0, 15), _features(s0, 1.0, 15))
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    z0, y = torch.randn(3, 20, 7, generator=g) * 4, torch.randint(0, 7, (60,), generator=g)
    z1, z2 = z0.clone().requires_grad_(True), z0.clone().requires_grad_(True)
    got, ref = _summed_ce(z1, y), F.cross_entropy(z2.reshape(-1, 7), y, reduction="sum") / 20
    got.backward()
    ref.backward()
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(z1.grad, z2.grad)


def test_fedaux_training_rows_propagation_is_the_full_products_rows_bit_for_bit(fg):
    """``_propagate`` over :func:`rows_operator` (P's training rows as CSR, its transpose for the gradient)
    against the full sparse product read at the training rows: values and gradient bitwise equal."""
    from pace_nb.methods.baselines.fedaux import _propagate, rows_operator
    from pace_nb.nn.gcn import propagation_matrix

    g = torch.Generator().manual_seed(7)
    for c in fg.clients:
        P, tm = propagation_matrix(c.edge_index, c.num_nodes), c.train_mask
        t0, up = torch.randn(3, c.num_nodes, 5, generator=g), torch.randn(3, int(tm.sum()), 5, generator=g)
        got, ref = t0.clone().requires_grad_(True), t0.clone().requires_grad_(True)
        v = _propagate(rows_operator(P, tm), got)
        w = torch.sparse.mm(P, ref.transpose(0, 1).reshape(c.num_nodes, 15)).view(c.num_nodes, 3, 5).transpose(0, 1)[:, tm]
        (v * up).sum().backward()
        (w * up).sum().backward()
        assert v.shape == w.shape and torch.equal(v, w) and torch.equal(got.grad, ref.grad)
        assert not bool(got.grad[:, ~(P.to_dense()[tm] != 0).any(0)].any())  # nodes no training row reads


def test_fedaux_cosine_has_cosine_similaritys_value_and_gradient():
    """``cosine_to`` (FedAux's score s = cos(h, a), one product-sum) against ``F.cosine_similarity``:
    values and gradients on a stack, all-zero rows (a dead ReLU row) included."""
    from pace_nb.methods.baselines.fedaux import cosine_to

    g = torch.Generator().manual_seed(4)
    h0, a0 = torch.randn(3, 30, 8, generator=g).relu(), torch.randn(3, 8, generator=g)
    h0[1, :4] = 0.0
    up = torch.randn(3, 30, generator=g)
    grads = []
    for fn in (cosine_to, lambda h, a: F.cosine_similarity(h, F.normalize(a, dim=-1).unsqueeze(-2), dim=-1)):
        h, a = h0.clone().requires_grad_(True), a0.clone().requires_grad_(True)
        s = fn(h, a)
        (s * up).sum().backward()
        grads.append((s.detach(), h.grad, a.grad))
    (s1, gh1, ga1), (s2, gh2, ga2) = grads
    torch.testing.assert_close(s1, s2, rtol=1e-6, atol=1e-6)
    assert torch.equal(s1[1, :4], torch.zeros(4))
    live = torch.ones(3, 30, dtype=torch.bool)
    live[1, :4] = False
    torch.testing.assert_close(gh1[live], gh2[live], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gh1[~live], gh2[~live], rtol=1e-5, atol=0)  # 1/eps-sized, as ATen's
    torch.testing.assert_close(ga1, ga2, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- names and params


def test_unknown_method_and_bad_parameters():
    with pytest.raises(UnknownNameError, match="fedavg"):
        make_method("fedfoo")
    with pytest.raises(ConfigError, match="mu"):
        make_method("fedprox", mu=None)
    with pytest.raises(ConfigError, match="mu"):
        make_method("fedprox", mu=-1.0)
    with pytest.raises(ConfigError, match="bogus"):
        make_method("fedavg", bogus=1)
    with pytest.raises(PaceNBError):
        make_method("fedgta", moment_type="weird")
    assert set(group("pace_control")) <= set(method_names())


# ----------------------------------------------------------------------------- the mechanism


def test_plain_methods_reuse_local_bit_for_bit(fg, local):
    run = train_federated(fg, "fedavg", 1, 10, (SEED,), config=CFG, local=local, device="cpu", progress=False)
    fresh = train_federated(fg, "fedavg", 1, 10, (SEED,), config=CFG, device="cpu", progress=False)
    for k in run.trained:
        assert torch.equal(run.trained[k], local.params[k])
        torch.testing.assert_close(fresh.trained[k], local.params[k], rtol=1e-5, atol=1e-6)
    p = size_weights(torch.tensor([c.num_nodes for c in fg.clients], dtype=torch.float64))
    expect = torch.einsum("k,k...->...", p.float(), local.params["conv2.weight"])
    for k in range(3):
        torch.testing.assert_close(run.model(0, k)["conv2.weight"], expect)


@pytest.mark.parametrize("name", method_names())  # every registered federated baseline
def test_one_round_rows_for_every_method(fg, local, name):
    params = {"glb_epochs": 1, "num_gen": 30, "it_d": 2} if name == "fedtad" else {}
    rows = run_federated(fg, name, (SEED,), config=CFG, local=local, device="cpu", progress=False,
                         method_params=params)
    assert {r["variant"] for r in rows} == {"native", "cnll"}
    assert len(rows) == 2 * (fg.num_clients + 1)
    pooled = {r["variant"]: r for r in rows if r["receiver"] == -1}
    for r in rows:
        assert r["method"] == name and 0 <= r["acc"] <= 100
    assert 0 <= pooled["cnll"]["alpha"] <= 1
    recv = [r for r in rows if r["variant"] == "cnll" and r["receiver"] >= 0]
    for r in recv:  # alpha = 0 → exactly Local
        if r["alpha"] == 0:
            assert r["acc"] == r["acc_local"]


@pytest.mark.parametrize("name", method_names())  # every registered federated baseline
def test_training_does_not_depend_on_the_chunking(fg, name):
    """A model trains bitwise alike in any chunk of models (``max_batch``), whatever its method's local
    terms: two rounds of two seeds × three clients, all six models in one chunk vs one model per chunk
    (a loss that stacks one client's seeds must give each model the numbers it gets alone)."""
    params = {"glb_epochs": 1, "num_gen": 30, "it_d": 2} if name == "fedtad" else {}
    runs = [train_federated(fg, name, rounds=2, local_epochs=3, seeds=(SEED, SEED + 1), config=CFG, device="cpu",
                            progress=False, max_batch=size, method_params=params) for size in (None, 1)]
    for k in runs[0].trained:
        assert torch.equal(runs[0].trained[k], runs[1].trained[k]), k
        assert torch.equal(runs[0].returned[k], runs[1].returned[k]), k


def test_fedproto_one_round_is_local(fg, local):
    run = train_federated(fg, "fedproto", 1, 10, (SEED,), config=CFG, local=local, device="cpu", progress=False)
    for k in local.params:
        assert torch.equal(run.returned[k], local.params[k])


def test_multi_round_fedavg_and_moon_run(fg):
    run = train_federated(fg, "fedavg", rounds=3, local_epochs=2, seeds=(SEED,), config=CFG, device="cpu",
                          progress=False)
    assert run.rounds == 3 and len(run.history) == 3
    w = run.returned["conv1.weight"]
    assert torch.equal(w[0], w[1]) and torch.equal(w[1], w[2])  # one global model
    moon = train_federated(fg, "moon", rounds=2, local_epochs=2, seeds=(SEED,), config=CFG, device="cpu",
                           progress=False)
    proto = train_federated(fg, "fedproto", rounds=2, local_epochs=2, seeds=(SEED,), config=CFG, device="cpu",
                            progress=False)
    assert torch.isfinite(moon.returned["conv1.weight"]).all() and torch.isfinite(proto.returned["conv1.weight"]).all()
    with pytest.raises(ConfigError, match="rounds"):
        train_federated(fg, "fedavg", rounds=0, seeds=(SEED,), progress=False)


def test_protocol_registry_runs_controls_and_pace(fg):
    from pace_nb.analysis.summary import summarize
    from pace_nb.methods.protocol import available_methods, get_method, run_protocol

    assert set(group("pace_control")) <= set(available_methods())
    rows = run_protocol(fg, methods=["local", "fedavg", "fedtad", "pace"], seeds=(SEED,), device="cpu",
                        progress=False, train_config=CFG, method_params={"fedtad": {"glb_epochs": 1, "num_gen": 30}})
    summ = summarize(rows)
    got = set(zip(summ["method"], summ["variant"], strict=True))
    assert {("fedavg", "native"), ("fedavg", "cnll"), ("fedtad", "cnll"), ("fedtad", "native"), ("local", "native")} <= got
    local_acc = float(summ[(summ.method == "local")]["acc_mean"].iloc[0])
    # CNLL never moves a receiver whose validation NLL does not improve: pooled +CNLL stays near Local
    for m in ("fedavg", "fedtad"):
        acc = float(summ[(summ.method == m) & (summ.variant == "cnll")]["acc_mean"].iloc[0])
        assert acc >= local_acc - 10
    with pytest.raises(UnknownNameError):
        get_method("fedfoo")
