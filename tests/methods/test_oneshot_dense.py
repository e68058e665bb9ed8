"""DENSE (pace_nb.methods.oneshot.dense): the released AdvSynthesizer's mechanisms on the demo
graph — the boundary term on disagreeing samples, a generator reset every epoch, a growing data
pool visited once per epoch, uploads with the client's weights, the teachers' ensemble recorded."""
from __future__ import annotations

import json
import math

import pytest
import torch

from pace_nb.methods.oneshot import base, dense, make_oneshot, run_oneshot
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix
from pace_nb.nn.training import TrainConfig, train_local

SEED = 5
SMALL = {"epochs": 4, "g_steps": 3, "synthesis_batch_size": 32, "nz": 16, "gen_hidden": 16}


@pytest.fixture(scope="module")
def fg():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="dirichlet", num_clients=10, seed=2024, beta=0.05)


@pytest.fixture(scope="module")
def local(fg, one_thread):
    return train_local(fg, (SEED,), progress=False)


def server_ctx(fg, local):
    return base.OneShotContext(fg, SEED, TrainConfig(), torch.device("cpu"), [local.model(0, k) for k in range(10)])


def messages(method, ctx, fg):
    return [base.decode(base.encode(method.client_message(ctx, k, c))) for k, c in enumerate(fg.clients)
            if bool(c.train_mask.any())]


def test_adversarial_mask_is_exactly_the_disagreeing_samples():
    g = torch.Generator().manual_seed(0)
    t, s = torch.randn(50, 4, generator=g), torch.randn(50, 4, generator=g)
    s[:10] = t[:10] + 0.01  # surely agreeing rows
    total, picked = 0.0, []
    for i in range(50):
        ti, si = t[i].tolist(), s[i].tolist()
        if max(range(4), key=ti.__getitem__) != max(range(4), key=si.__getitem__):
            picked.append(i)
            lt = [v - math.log(sum(math.exp(u) for u in ti)) for v in ti]
            ls = [v - math.log(sum(math.exp(u) for u in si)) for v in si]
            total += sum(math.exp(a) * (a - b) for a, b in zip(lt, ls, strict=True))
    mask = dense.disagreement_mask(t, s)
    assert torch.nonzero(mask).flatten().tolist() == picked and 0 < len(picked) < 40
    assert dense.adversarial_loss(t, s).item() == pytest.approx(-total / 50, rel=1e-5)


def test_bn_loss_sums_over_teachers():
    pre = torch.tensor([[[1.0], [3.0]], [[0.0], [0.0]]])  # teacher 0: mean 2, var 1; teacher 1: mean 0, var 0
    mean, var = torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [0.0]])
    assert dense.bn_loss(pre, mean, var).item() == pytest.approx((2 + 1) + (1 + 0))


def test_generator_reset_every_epoch_and_pool_grows(fg, local, monkeypatch):
    ctx = server_ctx(fg, local)
    method = make_oneshot("dense", **SMALL)
    msgs = messages(method, ctx, fg)
    resets, kd_calls = [], []
    real_reset, real_kd = dense.reset_generator, dense.kd_loss

    def spy_reset(gen, bias, rng):
        real_reset(gen, bias, rng)
        resets.append({k: v.clone() for k, v in gen.state_dict().items()})

    def spy_kd(t, s, T):
        kd_calls.append(T)
        return real_kd(t, s, T)

    monkeypatch.setattr(dense, "reset_generator", spy_reset)
    monkeypatch.setattr(dense, "kd_loss", spy_kd)
    method.server_train(ctx, msgs, None)
    E = SMALL["epochs"]
    assert len(resets) == E
    assert ctx.state["dense_pool_sizes"] == list(range(1, E + 1))
    assert len(kd_calls) == E * (E + 1) // 2 and set(kd_calls) == {20.0}  # every pooled graph, each epoch
    # each epoch's generator starts from reset_model's draw alone, not from the last epoch's weights
    for e, state in enumerate(resets):
        fresh = dense.make_generator(SMALL["nz"], SMALL["gen_hidden"], fg.num_features)
        real_reset(fresh, state["3.bias"], ctx.generator(-1, salt=1000 + e))
        assert all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())
    w = resets[0]["0.weight"]
    assert abs(float(w.std()) - 0.02) < 0.003 and float(resets[0]["0.bias"].abs().max()) == 0.0
    assert not torch.equal(resets[0]["0.weight"], resets[1]["0.weight"])


def test_upload_has_the_clients_weights_and_row_records_the_ensemble(fg, local):
    ctx = server_ctx(fg, local)
    method = make_oneshot("dense", **SMALL)
    msg = base.decode(base.encode(method.client_message(ctx, 0, fg.clients[0])))
    assert all(torch.equal(msg[f"model.{n}"], local.model(0, 0)[n].float()) for n in WEIGHT_KEYS)
    row = run_oneshot(fg, method, (SEED,), local=local, progress=False)[0]
    p = json.loads(row["params"])
    assert p["bytes_per_client"][0] == len(base.encode(method.client_message(ctx, 0, fg.clients[0])))
    # the teachers' ensemble (mean logits) on the complete graph, computed independently
    d, mask = fg.data, fg.global_mask("test")
    P = propagation_matrix(d.edge_index, int(d.num_nodes))
    ks = [k for k, c in enumerate(fg.clients) if bool(c.train_mask.any())]
    z = torch.stack([gcn_forward(local.model(0, k), d.x.float(), P) for k in ks]).mean(0)
    want = 100 * float((z.argmax(1)[mask] == d.y.view(-1)[mask]).float().mean())
    assert p["teacher_ensemble_acc"] == pytest.approx(want, abs=1e-4)


def test_deterministic(fg, local):
    a = run_oneshot(fg, make_oneshot("dense", **SMALL), (SEED,), local=local, progress=False)[0]
    b = run_oneshot(fg, make_oneshot("dense", **SMALL), (SEED,), local=local, progress=False)[0]
    assert a["acc"] == b["acc"] and a["bytes_up"] == b["bytes_up"] and a["f1_macro"] == b["f1_macro"]


def test_released_defaults():
    cfg = make_oneshot("dense").cfg
    assert (cfg.epochs, cfg.g_steps, cfg.synthesis_batch_size, cfg.nz, cfg.lr_g, cfg.lr, cfg.momentum, cfg.T,
            cfg.adv, cfg.bn, cfg.oh) == (200, 30, 256, 256, 1e-3, 0.005, 0.9, 20.0, 1.0, 0.0, 1.0)


def test_student_follows_sgd_with_momentum(fg, local, monkeypatch):
    made = []
    real = torch.optim.SGD

    def spy(params, **kw):
        made.append(kw)
        return real(params, **kw)

    monkeypatch.setattr(torch.optim, "SGD", spy)
    make_oneshot("dense", **{**SMALL, "epochs": 1}).server_train(server_ctx(fg, local), messages(
        make_oneshot("dense"), server_ctx(fg, local), fg), None)
    assert made == [{"lr": 0.005, "momentum": 0.9}]
