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
    training.clear_shared_layouts()  # an earlier test's training on these clients would have counted them
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


@pytest.mark.parametrize("transposed", [False, True])
def test_ragged_mm_gradients_match_per_model_autograd(transposed):
    """``_RaggedMM``'s backward (the weight gradient in the weight's own layout when it is a transposed
    view, as layer 2 and the head pass it) against autograd through one ``x_b @ w_b`` per model."""
    from pace_nb.nn.ragged import _RaggedMM

    gen = torch.Generator().manual_seed(3)
    sizes, d_in, d_out = [7, 0, 12, 5], 9, 3
    x = torch.randn(sum(sizes), d_in, generator=gen, requires_grad=True)
    stored = torch.randn(4, d_out, d_in, generator=gen) if transposed else torch.randn(4, d_in, d_out, generator=gen)
    stored.requires_grad_(True)
    w = stored.transpose(1, 2) if transposed else stored
    up = torch.randn(sum(sizes), d_out, generator=gen)
    (_RaggedMM.apply(x, w, sizes, None) * up).sum().backward()
    xr, sr = x.detach().clone().requires_grad_(True), stored.detach().clone().requires_grad_(True)
    wr = sr.transpose(1, 2) if transposed else sr
    out = torch.cat([xb @ wr[b] for b, xb in enumerate(xr.split(sizes))])
    (out * up).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(stored.grad, sr.grad, rtol=1e-6, atol=1e-6)
    assert stored.grad[1].abs().sum() == 0  # a model without rows gets no gradient


def test_ragged_bias_adds_in_place_exactly_and_sums_per_model():
    from pace_nb.nn.ragged import _RaggedBias

    gen = torch.Generator().manual_seed(5)
    sizes = [4, 0, 6]
    lengths = torch.tensor(sizes)
    base = torch.randn(10, 3, generator=gen)
    bias = torch.randn(3, 3, generator=gen, requires_grad=True)
    y = base.clone().requires_grad_(True)
    out = _RaggedBias.apply(y * 1.0, bias, lengths, sizes)  # a fresh product, as every caller passes
    assert torch.equal(out, base + torch.repeat_interleave(bias.detach(), lengths, dim=0))
    up = torch.randn(10, 3, generator=gen)
    (out * up).sum().backward()
    assert torch.equal(y.grad, up)
    torch.testing.assert_close(bias.grad, torch.stack([s.sum(0) for s in up.split(sizes)]), rtol=0, atol=0)


def test_consecutive_trainings_on_one_federation_share_their_layout(monkeypatch):
    import pace_nb.nn.chunk as chunk

    cfg = TrainConfig(hidden=16, epochs=3)
    clients, init, seeds, client_of = _setup(num_seeds=2, sizes=(30, 70, 12))
    training.clear_shared_layouts()
    built = []
    real = chunk.ragged_graphs
    monkeypatch.setattr(chunk, "ragged_graphs", lambda *a, **k: built.append(1) or real(*a, **k))
    first, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    second, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    assert len(built) == 1  # the second training found the first one's layout
    fresh, _ = train_models(clients, init, seeds, client_of, cfg, layouts={}, **NOP)
    assert len(built) == 2
    other = synthetic_clients((20, 25))
    assert training.shared_layouts(other) is not training.shared_layouts(clients)  # other clients: a new memo
    for n in first:
        assert torch.equal(first[n], second[n]) and torch.equal(first[n], fresh[n])


def test_binary_features_at_a_third_density_take_the_sparse_product():
    """Computers' bag-of-words (binary, density 0.35) trains faster on the sparse layer-1 product
    (benchmarks/bench_sparse_threshold.py); fully dense features keep the dense one."""
    assert gcn.sparse_enough(35, 10, 10) and not gcn.sparse_enough(60, 10, 10)


def test_feature_products_with_32_bit_indices_are_bitwise_those_with_64_bit_ones():
    from pace_nb.nn.gcn import csr_mm
    from pace_nb.nn.ragged import _int32_indices

    clients = synthetic_clients((30, 45, 25))
    g = ragged_graphs([c.x for c in clients], [propagation_matrix(c.edge_index, c.num_nodes) for c in clients],
                      sparse=True)
    assert g.x.crow_indices().dtype == torch.int32 and g.xt.col_indices().dtype == torch.int32
    gen = torch.Generator().manual_seed(0)
    for a in (g.x, g.xt):
        wide = torch.sparse_csr_tensor(a.crow_indices().long(), a.col_indices().long(), a.values(), a.shape)
        d = torch.randn(a.shape[1], 16, generator=gen)
        assert torch.equal(csr_mm(a, d, g.unit_x), csr_mm(wide, d, g.unit_x))
    assert _int32_indices(wide).col_indices().dtype == torch.int32


def test_a_changed_sparse_threshold_is_decided_anew_on_shared_layouts(monkeypatch):
    import pace_nb.nn.chunk as chunk

    cfg = TrainConfig(hidden=16, epochs=2)
    clients, init, seeds, client_of = _setup(num_seeds=1, sizes=(30, 12))
    training.clear_shared_layouts()
    paths = []
    real = chunk.ragged_graphs
    monkeypatch.setattr(chunk, "ragged_graphs", lambda *a, **k: paths.append(k["sparse"]) or real(*a, **k))
    for threshold in (0.0, 1.1, 0.0):
        monkeypatch.setattr(gcn, "SPARSE_DENSITY", threshold)
        train_models(clients, init, seeds, client_of, cfg, **NOP)
    assert paths == [False, True, False]  # the memo never hands one path's layout to the other
