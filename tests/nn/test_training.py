"""pace_nb.nn.training: the batched trainer equals one-model-at-a-time PyG training."""
from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import require_dataset
from pace_nb.core.config import model_seed
from pace_nb.core.errors import ConfigError
from pace_nb.nn.gcn import gcn_forward, init_params, propagation_matrix, stack_params
from pace_nb.nn.training import (LocalModels, TrainConfig, TrainStep, batched_logits, client_hidden, client_logits,
                              train_local, train_models)
from synthetic import PyGGCN, batched_setup as _setup, synthetic_clients


pytestmark = pytest.mark.usefixtures("one_thread")

NOP = dict(progress=False, device="cpu")


def _pyg_reference(client, params, config, extra=None):
    """One model alone: PyG GCNConv model + torch Adam (the OpenFGL loop)."""
    f, h, c = params["conv1.weight"].shape[1], params["conv1.weight"].shape[0], params["conv2.weight"].shape[0]
    model = PyGGCN(f, h, c, config.dropout).load(params).train()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for _ in range(config.epochs):
        opt.zero_grad()
        z = model(client.x, client.edge_index)
        loss = F.cross_entropy(z[client.train_mask], client.y[client.train_mask])
        if extra is not None:
            loss = loss + extra(model)
        loss.backward()
        opt.step()
    return model.params()


def _maxdiff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in b)


@pytest.fixture(params=["dense", "sparse"])
def feature_path(request, monkeypatch):
    """Run a test on both layer-1 paths (dense bmm / block-diagonal sparse product)."""
    import pace_nb.nn.gcn as gcn

    monkeypatch.setattr(gcn, "SPARSE_DENSITY", 0.0 if request.param == "dense" else 1.1)
    return request.param


def test_batched_equals_pyg_loop_without_dropout(feature_path):
    cfg = TrainConfig(hidden=16, dropout=0.0, epochs=100)
    clients, init, seeds, client_of = _setup()
    out, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    for b, k in enumerate(client_of):
        ref = _pyg_reference(clients[k], {n: v[b] for n, v in init.items()}, cfg)
        assert _maxdiff({n: v[b] for n, v in out.items()}, ref) < 1e-5
        assert _maxdiff({n: v[b] for n, v in out.items()}, {n: v[b] for n, v in init.items()}) > 1e-2


def test_dropout_results_do_not_depend_on_batching(feature_path):
    cfg = TrainConfig(hidden=16, epochs=30)
    clients, init, seeds, client_of = _setup(num_seeds=3)
    full, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    for mb in (1, 2, 4):
        chunked, _ = train_models(clients, init, seeds, client_of, cfg, max_batch=mb, **NOP)
        for n in full:
            assert torch.equal(full[n], chunked[n]), (mb, n)
    b = 4  # alone, and inside a reordered batch of others
    alone, _ = train_models(clients, {n: v[[b]] for n, v in init.items()}, [seeds[b]], [client_of[b]], cfg, **NOP)
    order = [7, 4, 0, 8]
    mixed, _ = train_models(clients, {n: v[order] for n, v in init.items()}, [seeds[i] for i in order],
                            [client_of[i] for i in order], cfg, **NOP)
    for n in full:
        assert torch.equal(alone[n][0], full[n][b]) and torch.equal(mixed[n][1], full[n][b])
    # dropout is active: another seed gives another model
    other, _ = train_models(clients, {n: v[[b]] for n, v in init.items()}, [seeds[b] + 1], [client_of[b]], cfg, **NOP)
    assert not torch.equal(other["conv1.weight"], alone["conv1.weight"])


def test_extra_loss_proximal_term_matches_reference():
    cfg = TrainConfig(hidden=16, dropout=0.0, epochs=40)
    clients, init, seeds, client_of = _setup(num_seeds=1)
    mu, seen = 0.3, []

    def prox(step: TrainStep):
        seen.append(step)
        w0 = {n: v[step.models].to(step.params[n].device) for n, v in init.items()}
        return sum(mu / 2 * (step.params[n] - w0[n]).pow(2).sum() for n in w0)

    out, _ = train_models(clients, init, seeds, client_of, cfg, extra_loss=prox, max_batch=2, **NOP)
    for b, k in enumerate(client_of):
        w0 = {n: v[b] for n, v in init.items()}

        def ref_prox(model, w0=w0):
            return sum(mu / 2 * (p - w0[n.replace("lin.", "")]).pow(2).sum() for n, p in model.named_parameters())

        ref = _pyg_reference(clients[k], w0, cfg, extra=ref_prox)
        assert _maxdiff({n: v[b] for n, v in out.items()}, ref) < 1e-5
    plain, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    assert _maxdiff(out, plain) > 1e-3
    st = seen[-1]
    assert st.epoch == cfg.epochs - 1 and st.models == [2] and st.clients == [2]
    assert seen[0].models == [0, 1] and seen[0].clients == [0, 1]
    assert [h.shape for h in seen[0].hidden] == [(30, 16), (45, 16)]
    assert [z.shape for z in seen[0].logits] == [(30, 4), (45, 4)]
    assert all(h.requires_grad and (h >= 0).all() for h in seen[0].hidden)


def test_masked_gcn_trains_weights_and_masks(feature_path):
    cfg = TrainConfig(hidden=8, dropout=0.0, epochs=20)
    clients, init, seeds, client_of = _setup(num_seeds=1, hidden=8)
    g = torch.Generator().manual_seed(0)
    init = dict(init, **{"conv1.mask": torch.rand(init["conv1.weight"].shape, generator=g),
                         "conv2.mask": torch.ones_like(init["conv2.weight"])})
    out, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    for b, k in enumerate(client_of):
        c = clients[k]
        p = {n: v[b].clone().requires_grad_(True) for n, v in init.items()}
        opt = torch.optim.Adam(p.values(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        P = propagation_matrix(c.edge_index, c.num_nodes).to_dense()
        for _ in range(cfg.epochs):
            opt.zero_grad()
            z = p["conv2.bias"] + P @ (torch.relu(P @ (c.x @ (p["conv1.weight"] * p["conv1.mask"]).t())
                                                  + p["conv1.bias"]) @ (p["conv2.weight"] * p["conv2.mask"]).t())
            F.cross_entropy(z[c.train_mask], c.y[c.train_mask]).backward()
            opt.step()
        assert _maxdiff({n: v[b] for n, v in out.items()}, p) < 1e-5
    assert _maxdiff({"m": out["conv2.mask"]}, {"m": init["conv2.mask"]}) > 1e-3


def test_validation_labels_never_used():
    cfg = TrainConfig(hidden=16, epochs=15)
    clients, init, seeds, client_of = _setup()
    a, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    for c in clients:
        c.y = c.y.clone()
        c.y[c.val_mask | c.test_mask] = (c.y[c.val_mask | c.test_mask] + 1) % 4
    b, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_client_without_training_nodes_keeps_its_init_and_others_are_unchanged():
    cfg = TrainConfig(hidden=16, epochs=3)
    clients, init, seeds, client_of = _setup(num_seeds=1)
    full, _ = train_models(clients, init, seeds, client_of, cfg, **NOP)
    clients[1].train_mask = torch.zeros_like(clients[1].train_mask)
    with pytest.warns(RuntimeWarning, match=r"clients \[1\] have no training nodes"):
        part, curves = train_models(clients, init, seeds, client_of, cfg, record=True, **NOP)
    for n in init:
        assert torch.equal(part[n][1], init[n][1])          # skipped: initial parameters
        assert torch.equal(part[n][0], full[n][0]) and torch.equal(part[n][2], full[n][2])
    assert set(curves["model"]) == {0, 2}


def test_bad_inputs_raise_config_errors():
    cfg = TrainConfig(hidden=16, epochs=2)
    clients, init, seeds, client_of = _setup(num_seeds=1)
    with pytest.raises(ConfigError, match="model_seeds"):
        train_models(clients, init, seeds[:2], client_of, cfg, **NOP)
    with pytest.raises(ConfigError, match="client 7"):
        train_models(clients, init, seeds, [0, 1, 7], cfg, **NOP)
    with pytest.raises(ConfigError, match="hidden"):
        train_models(clients, init, seeds, client_of, TrainConfig(hidden=8), **NOP)
    with pytest.raises(ConfigError, match="batched"):
        train_models(clients, {n: v[0] for n, v in init.items()}, seeds, client_of, cfg, **NOP)
    with pytest.raises(ConfigError, match="max_batch"):
        train_models(clients, init, seeds, client_of, cfg, max_batch=0, **NOP)
    with pytest.raises(ConfigError, match="dropout"):
        TrainConfig(dropout=1.0)


def test_record_curves_are_tidy_and_loss_decreases():
    cfg = TrainConfig(hidden=16, epochs=25)
    clients, init, seeds, client_of = _setup(num_seeds=1)
    _, curves = train_models(clients, init, seeds, client_of, cfg, record=True, **NOP)
    assert list(curves.columns) == ["model", "epoch", "loss", "train_acc", "val_acc"] and len(curves) == 3 * 25
    first, last = curves[curves.epoch == 0], curves[curves.epoch == 24]
    assert (last.loss.values < first.loss.values).all()
    assert curves.train_acc.between(0, 1).all() and curves.val_acc.between(0, 1).all()
    assert train_models(clients, init, seeds, client_of, cfg, **NOP)[1] is None


class _FG:
    """Minimal FederatedGraph stand-in (the real one comes from federation.build_federated)."""

    def __init__(self, clients, num_classes=4):
        self.clients, self.num_classes = clients, num_classes
        self.num_clients, self.num_features = len(clients), int(clients[0].x.shape[1])


def test_train_local_layout_and_eval_helpers():
    cfg = TrainConfig(hidden=16, epochs=10)
    clients = synthetic_clients()
    lm = train_local(_FG(clients), seeds=(11, 12), config=cfg, **NOP)
    assert isinstance(lm, LocalModels) and lm.params["conv1.weight"].shape == (6, 16, 40)
    assert torch.equal(lm.init[1]["conv1.weight"], init_params(40, 4, 16, 12)["conv1.weight"])
    one, _ = train_models(clients, stack_params([lm.init[1]]), [model_seed(12, 2)], [2], cfg, **NOP)
    assert all(torch.equal(lm.model(1, 2)[n], one[n][0]) for n in one)
    assert torch.equal(lm.params["conv2.bias"][1 * 3 + 2], lm.model(1, 2)["conv2.bias"])
    with pytest.raises(ConfigError):
        lm.model(2, 0)
    p, c = lm.model(0, 1), clients[1]
    z = client_logits(p, c)
    P = propagation_matrix(c.edge_index, c.num_nodes)
    ref, h = gcn_forward(p, c.x, P, return_hidden=True)
    assert torch.allclose(z, ref) and torch.allclose(client_hidden(p, c), h)
    zs = batched_logits(lm.params, clients, [0, 1, 2, 0, 1, 2])
    assert [t.shape for t in zs] == [(30, 4), (45, 4), (25, 4)] * 2 and torch.allclose(zs[1], z, atol=1e-6)


@pytest.mark.slow
def test_cora_batched_matches_pyg_loop():
    require_dataset("Cora")
    federation = pytest.importorskip("pace_nb.data.federation")
    if not hasattr(federation, "build_federated"):
        pytest.skip("federation.build_federated not available yet")
    fg = federation.build_federated("Cora", "louvain", 10)
    cfg = TrainConfig(dropout=0.0)
    lm = train_local(fg, seeds=(104729,), config=cfg, **NOP)
    for k in (0, 5):
        ref = _pyg_reference(fg.clients[k], lm.init[0], cfg)
        assert _maxdiff(lm.model(0, k), ref) < 1e-4


def test_recording_validation_accuracy_leaves_the_trained_params_bitwise_unchanged():
    from pace_nb.data.federation import build_federated

    fg = build_federated("demo", "louvain", 4)
    cfg = TrainConfig(hidden=16, epochs=20)
    off = train_local(fg, seeds=(1, 2), config=cfg, **NOP)
    on = train_local(fg, seeds=(1, 2), config=cfg, record=True, **NOP)
    assert off.curves is None and on.curves is not None and on.curves["val_acc"].notna().all()
    assert all(torch.equal(off.params[n], on.params[n]) for n in off.params)


def test_recorded_validation_accuracy_is_the_forward_passes_accuracy_on_validation_nodes():
    cfg = TrainConfig(hidden=16, epochs=1, dropout=0.0)  # no dropout: the training forward is the eval forward
    clients, init, seeds, client_of = _setup(num_seeds=1)
    clients[2].val_mask = torch.zeros_like(clients[2].val_mask)
    _, curves = train_models(clients, init, seeds, client_of, cfg, record=True, **NOP)
    for b, k in enumerate(client_of[:2]):
        z = client_logits({n: v[b] for n, v in init.items()}, clients[k])
        vm = clients[k].val_mask
        want = float((z[vm].argmax(1) == clients[k].y[vm]).float().mean())
        assert curves.val_acc[b] == pytest.approx(want, abs=1e-6)
    assert np.isnan(curves.val_acc[2])  # a client without validation nodes


def test_bit_drawn_dropout_trains_and_does_not_depend_on_batching():
    """Dropout draws: ``"auto"`` (the default) is ``"bits"`` at p = ½ and ``"uniform"`` otherwise; bits are
    other masks than the uniform draw (other parameters), as independent of chunking as it, and a clear
    error for p other than ½ or an unknown name (in the config or the argument)."""
    from pace_nb.methods.protocol import federation
    from pace_nb.nn.training import train_models

    fg = federation("demo", partition="louvain", num_clients=3, data_seed=0)
    cfg = TrainConfig(epochs=5)
    assert cfg.dropout_draw == "auto"
    init = stack_params([init_params(fg.num_features, fg.num_classes, cfg.hidden, 1) for _ in range(3)])
    args = (fg.clients, init, [7, 8, 9], [0, 1, 2], cfg)
    whole, _ = train_models(*args, dropout_draw="bits", device="cpu", progress=False)
    split, _ = train_models(*args, dropout_draw="bits", device="cpu", progress=False, max_batch=1)
    auto, _ = train_models(*args, device="cpu", progress=False)  # the default: bits at p = 1/2
    uniform, _ = train_models(*args, device="cpu", progress=False, dropout_draw="uniform")
    from_config, _ = train_models(*args[:4], TrainConfig(epochs=5, dropout_draw="bits"), device="cpu", progress=False)
    assert all(torch.equal(whole[k], split[k]) and torch.equal(whole[k], auto[k]) for k in whole)
    assert all(torch.equal(whole[k], from_config[k]) for k in whole)
    assert not torch.equal(whole["conv1.weight"], uniform["conv1.weight"])
    p3 = TrainConfig(epochs=2, dropout=0.3)  # auto: uniform at p = 0.3, as an explicit "uniform"
    a, _ = train_models(fg.clients, init, [7, 8, 9], [0, 1, 2], p3, device="cpu", progress=False)
    u, _ = train_models(fg.clients, init, [7, 8, 9], [0, 1, 2], p3, dropout_draw="uniform", device="cpu",
                        progress=False)
    assert all(torch.equal(a[k], u[k]) for k in a)
    with pytest.raises(ConfigError, match="dropout_draw"):
        train_models(*args, dropout_draw="philox", device="cpu", progress=False)
    with pytest.raises(ConfigError, match="dropout_draw"):
        TrainConfig(dropout_draw="philox")
    with pytest.raises(ConfigError, match="p = 0.5"):
        TrainConfig(dropout=0.3, dropout_draw="bits")
    with pytest.raises(ConfigError, match="p = 0.5"):
        train_models(fg.clients, init, [7, 8, 9], [0, 1, 2], p3, dropout_draw="bits", device="cpu", progress=False)


def test_proximal_gradient_in_blocks_is_the_whole_tensors_bit_for_bit():
    """:func:`~pace_nb.nn.optim.add_proximal_` block by block (a tensor over three blocks, a ragged last one)
    adds exactly ``(p − a) · μ`` as one pass does; without a gradient it sets it; a non-contiguous gradient
    takes the one-pass path."""
    from pace_nb.nn.optim import PROXIMAL_BLOCK, add_proximal_

    g = torch.Generator().manual_seed(5)
    n = 3 * PROXIMAL_BLOCK + 123
    p, a, g0 = (torch.randn(2, n // 2 + 1, generator=g) for _ in range(3))
    mu, buf = 0.37, torch.empty(PROXIMAL_BLOCK)
    p.grad = g0.clone()
    add_proximal_(p, a, mu, buf)
    expect = g0 + torch.sub(p, a).mul_(mu)
    assert torch.equal(p.grad, expect)
    q = p.clone()
    q.grad = None
    add_proximal_(q, a, mu, buf)
    assert torch.equal(q.grad, torch.sub(p, a).mul_(mu))
    r = p.t().clone().t()  # a non-contiguous layout
    r.grad = g0.t().clone().t()
    add_proximal_(r, a, mu, buf)
    assert torch.equal(r.grad, expect)
