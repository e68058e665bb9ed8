"""The ragged batched trainer (no padding) against one-client-at-a-time training and the padded path;
per-federation invariants counted once."""
from __future__ import annotations

import pytest
import torch
from demo_graphs import SEED, demo_fg
from synthetic import synthetic_clients
from synthetic import batched_setup as _setup

import pace_nb.nn.gcn as gcn
import pace_nb.nn.training as training
from pace_nb.methods.baselines import train_federated
from pace_nb.nn.gcn import (
    dropout_mask,
    gcn_forward,
    init_params,
    propagation_matrix,
    stack_params,
)
from pace_nb.nn.ragged import ragged_forward, ragged_graphs
from pace_nb.nn.training import TrainConfig, train_models

pytestmark = pytest.mark.usefixtures("one_thread")
NOP = {"progress": False, "device": "cpu"}


@pytest.fixture(params=["dense", "sparse"])
def feature_path(request, monkeypatch):
    monkeypatch.setattr(gcn, "SPARSE_DENSITY", 0.0 if request.param == "dense" else 1.1)
    return request.param


@pytest.mark.parametrize("head", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_ragged_forward_equals_single_models(sparse, head):
    clients = synthetic_clients((30, 45, 25))
    order = [2, 0, 1, 2]
    ps = [init_params(40, 4, 8, seed=s) for s in range(4)]
    for i, p in enumerate(ps):
        p["conv1.mask"] = torch.rand(8, 40, generator=torch.Generator().manual_seed(i))
        if head:  # FedPub's 3-layer model: conv2 is hidden, a masked linear head makes the logits
            p["conv2.weight"] = torch.randn(6, 8)
            p["conv2.bias"] = torch.randn(6)
            p["lin.weight"], p["lin.bias"], p["lin.mask"] = torch.randn(4, 6), torch.randn(4), torch.rand(4, 6)
    props = [propagation_matrix(c.edge_index, c.num_nodes) for c in clients]
    g = ragged_graphs([clients[k].x for k in order], [props[k] for k in order], sparse=sparse)
    assert g.sparse == sparse and g.sizes == [25, 30, 45, 25] and g.offsets == [0, 25, 55, 100] and g.num_rows == 125
    masks = torch.zeros(125, 8)
    for i, k in enumerate(order):
        n = clients[k].num_nodes
        dropout_mask((n, 8), 0.5, torch.Generator().manual_seed(i), "cpu", out=masks[g.offsets[i]:g.offsets[i] + n])
    z, h = ragged_forward(stack_params(ps), g, dropout_masks=masks)
    assert z.shape == (125, 4) and h.shape == (125, 8)
    for i, k in enumerate(order):
        rows = slice(g.offsets[i], g.offsets[i] + clients[k].num_nodes)
        ref, rh = gcn_forward(ps[i], clients[k].x, props[k], dropout=0.5, training=True,
                              generator=torch.Generator().manual_seed(i), return_hidden=True)
        torch.testing.assert_close(z[rows], ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(h[rows], rh, rtol=1e-5, atol=1e-5)


def test_ragged_batch_equals_each_client_alone_bitwise(feature_path):
    cfg = TrainConfig(hidden=16, epochs=25)  # dropout on
    clients, init, seeds, client_of = _setup(num_seeds=2, sizes=(30, 70, 12))
    batch, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    for b, k in enumerate(client_of):
        alone, _ = train_models([clients[k]], {n: v[[b]] for n, v in init.items()}, [seeds[b]], [0], cfg, **NOP)
        for n in batch:
            assert torch.equal(batch[n][b], alone[n][0]), (b, n)
    moved = max(float((batch[n] - init[n]).abs().max()) for n in init)
    assert moved > 1e-2


def test_ragged_agrees_with_padded_path(feature_path):
    cfg = TrainConfig(hidden=16, epochs=40)
    clients, init, seeds, client_of = _setup(num_seeds=2, sizes=(30, 70, 12))
    ragged, rc = train_models(clients, init, seeds, client_of, cfg, record=True, **NOP)
    padded, pc = train_models(clients, init, seeds, client_of, cfg, ragged=False, record=True, **NOP)
    for n in ragged:
        torch.testing.assert_close(ragged[n], padded[n], rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.tensor(rc["loss"].values), torch.tensor(pc["loss"].values), rtol=1e-5, atol=1e-6)
    # the extra-loss hook sees each model's own rows in both layouts
    seen = {}

    def spy(step, tag):
        seen[tag] = [tuple(h.shape) for h in step.hidden], [tuple(z.shape) for z in step.logits]
        return sum(0.0 * z.sum() for z in step.logits)

    for tag, rg in (("r", True), ("p", False)):
        train_models(clients, init, seeds, client_of, TrainConfig(hidden=16, epochs=1),
                     extra_loss=lambda s, t=tag: spy(s, t), ragged=rg, **NOP)
    assert seen["r"] == seen["p"] and seen["r"][0][:3] == [(30, 16), (70, 16), (12, 16)]
    # and its gradients reach each model's own rows alike in both layouts (a loss on every per-model tensor)
    def rows_loss(step):
        return sum(0.1 * (h * h).mean() + 0.2 * z.logsumexp(1).mean() + 0.05 * p.abs().mean()
                   for h, z, p in zip(step.hidden, step.logits, step.pre_hidden, strict=True))

    trained = {rg: train_models(clients, init, seeds, client_of, TrainConfig(hidden=16, epochs=20), extra_loss=rows_loss,
                                ragged=rg, **NOP)[0] for rg in (True, False)}
    plain, _ = train_models(clients, init, seeds, client_of, TrainConfig(hidden=16, epochs=20), **NOP)
    for n in trained[True]:
        torch.testing.assert_close(trained[True][n], trained[False][n], rtol=0, atol=1e-5)
    assert max(float((trained[True][n] - plain[n]).abs().max()) for n in plain) > 1e-3  # the loss did act


def test_federated_ragged_agrees_with_padded():
    fg = demo_fg()
    runs = {}
    real = training.train_models
    import pace_nb.methods.baselines.base as base

    for rg in (True, False):
        base.train_models = lambda *a, rg=rg, **kw: real(*a, ragged=rg, **kw)
        try:
            runs[rg] = train_federated(fg, "fedprox", 3, 3, (SEED,), config=TrainConfig(epochs=3), device="cpu",
                                       progress=False)
        finally:
            base.train_models = real
    for n in runs[True].returned:
        torch.testing.assert_close(runs[True].returned[n], runs[False].returned[n], rtol=0, atol=1e-5)


def test_feature_counts_are_counted_once_per_run(monkeypatch):
    fg = demo_fg()
    counted = []
    real = training._feature_nnz

    def counting(client, memo):
        if ("nnz", id(client)) not in memo:
            counted.append(client.index)
        return real(client, memo)

    monkeypatch.setattr(training, "_feature_nnz", counting)
    cfg = TrainConfig(epochs=2)
    memoised = train_federated(fg, "fedavg", 4, 2, (SEED,), config=cfg, device="cpu", progress=False)
    assert sorted(counted) == [0, 1, 2]  # once per client for the whole 4-round run
    monkeypatch.setattr(training, "_feature_nnz", lambda client, memo: int((client.x != 0).sum()))
    recount = train_federated(fg, "fedavg", 4, 2, (SEED,), config=cfg, device="cpu", progress=False)
    for n in memoised.returned:
        assert torch.equal(memoised.returned[n], recount.returned[n])
