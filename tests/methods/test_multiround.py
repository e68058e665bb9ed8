"""Multi-round mechanism: one global model per seed, each client's Adam across rounds, FedTAD's
vectorised server distillation — each against an independent computation."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from demo_graphs import SEED, demo_fg
from synthetic import fed_context as _ctx, rand_params as _rand_params
from synthetic import PyGGCN

from pace_nb.core.errors import ConfigError
from pace_nb.methods.baselines import make_method, train_federated
from pace_nb.methods.baselines.aggregation import size_weights
from pace_nb.methods.baselines.fedtad import (
    ConditionalGenerator,
    diversity_loss,
    knn_graph,
)
from pace_nb.nn.gcn import gcn_forward, init_params
from pace_nb.nn.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def fg():
    return demo_fg()


# ----------------------------------------------------------------------------- one global model
@pytest.mark.parametrize("name", ["fedavg", "fedprox", "moon"])
def test_fedavg_family_receivers_hold_one_global_model(fg, name):
    ctx = _ctx(fg, seeds=(SEED, SEED + 1))
    trained = _rand_params(6)
    out = make_method(name).aggregate(ctx, trained, {})
    p = size_weights(torch.tensor([c.num_nodes for c in fg.clients]))
    for k, v in trained.items():
        for s in range(2):
            expect = torch.einsum("k,k...->...", p, v[3 * s:3 * s + 3].double())
            for r in range(3):
                assert torch.equal(out[k][3 * s + r], out[k][3 * s])  # bitwise one model per seed
                torch.testing.assert_close(out[k][3 * s + r].double(), expect, rtol=1e-6, atol=1e-6)
        assert not torch.equal(out[k][0], out[k][3])  # seeds stay apart


def test_multi_round_receivers_identical(fg):
    run = train_federated(fg, "fedavg", rounds=3, local_epochs=2, seeds=(SEED, SEED + 1), config=TrainConfig(epochs=2),
                          device="cpu", progress=False)
    for v in run.returned.values():
        for s in range(2):
            assert all(torch.equal(v[3 * s + r], v[3 * s]) for r in range(3))


# ----------------------------------------------------------------------------- Adam across rounds
def _manual_fedavg(fg, rounds: int, epochs: int, cfg: TrainConfig, keep: bool):
    """Two-round FedAvg by hand: one PyG model and one ``torch.optim.Adam`` per client (created once
    when ``keep``, else every round); every round loads the global model into the client's weights."""
    w0 = init_params(fg.num_features, fg.num_classes, cfg.hidden, SEED)
    models = [PyGGCN(fg.num_features, cfg.hidden, fg.num_classes, 0.0).load(w0).train() for _ in fg.clients]
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay) for m in models]
    p = size_weights(torch.tensor([c.num_nodes for c in fg.clients])).float()
    glob = w0
    for _ in range(rounds):
        for j, (m, c) in enumerate(zip(models, fg.clients, strict=True)):
            m.load(glob)  # only the weights are replaced
            if not keep:
                opts[j] = torch.optim.Adam(m.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            for _ in range(epochs):
                opts[j].zero_grad()
                F.cross_entropy(m(c.x, c.edge_index)[c.train_mask], c.y[c.train_mask]).backward()
                opts[j].step()
        trained = [m.params() for m in models]
        glob = {k: sum(p[j] * trained[j][k] for j in range(len(models))) for k in w0}
    return glob


@pytest.mark.parametrize("mode", ["keep", "restart"])
def test_adam_state_across_rounds_matches_manual_adam(fg, mode):
    cfg = TrainConfig(hidden=16, dropout=0.0, epochs=4)
    run = train_federated(fg, "fedavg", rounds=2, local_epochs=4, seeds=(SEED,), config=cfg, device="cpu",
                          progress=False, method_params=None if mode == "keep" else {"optimizer_state": "restart"})
    assert run.params["optimizer_state"] == mode
    ref = _manual_fedavg(fg, 2, 4, cfg, keep=mode == "keep")
    other = _manual_fedavg(fg, 2, 4, cfg, keep=mode != "keep")
    for k in ref:
        torch.testing.assert_close(run.returned[k][0], ref[k], rtol=1e-5, atol=1e-5)
    assert max(float((ref[k] - other[k]).abs().max()) for k in ref) > 1e-3  # the two behaviours differ


def test_adam_state_default_and_bad_value(fg):
    assert make_method("fedprox").optimizer_state == "keep"
    with pytest.raises(ConfigError, match="optimizer_state"):
        make_method("fedavg", optimizer_state="sometimes")
    one = train_federated(fg, "fedavg", 1, 2, (SEED,), config=TrainConfig(epochs=2), device="cpu", progress=False)
    assert "optimizer_state" not in one.params  # one round: nothing to keep


# ----------------------------------------------------------------------------- FedTAD, loop reference
def _loop_distill(cfg, glob, clients, ckr, num_features, num_classes, tconf, seed):
    """FedTAD's server distillation with one forward and one loss per client and class (the reference)."""

    def l1(g, loc, labels, w):
        per_node = (g - loc).abs().mean(1)
        return sum(w[c] * per_node[labels == c].mean() for c in range(w.numel()) if bool((labels == c).any()))

    def ce(z, labels, w):
        return sum(w[c] * F.cross_entropy(z[labels == c], labels[labels == c]) for c in range(w.numel())
                   if bool((labels == c).any()))

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        gen = ConditionalGenerator(cfg.noise_dim, num_features, num_classes)
    g = torch.Generator().manual_seed(int(seed) + 1)
    params = {k: v.clone().requires_grad_(True) for k, v in glob.items()}
    opt_d = torch.optim.Adam(params.values(), lr=cfg.lr_d, weight_decay=tconf.weight_decay)
    opt_g = torch.optim.Adam(gen.parameters(), lr=cfg.lr_g, weight_decay=tconf.weight_decay)
    counts = [cfg.num_gen // num_classes] * num_classes
    counts[-1] += cfg.num_gen - sum(counts)
    labels = torch.repeat_interleave(torch.arange(num_classes), torch.tensor(counts))
    for _ in range(cfg.glb_epochs):
        z = torch.randn(cfg.num_gen, cfg.noise_dim, generator=g)
        gen.train()
        for _ in range(cfg.it_g):
            opt_g.zero_grad()
            x = gen(z, labels)
            P = knn_graph(x.detach(), cfg.topk)
            z_glob = gcn_forward({k: v.detach() for k, v in params.items()}, x, P)
            loss = len(clients) * cfg.lam2 * diversity_loss(z, x)
            for j, cl in enumerate(clients):
                z_loc = gcn_forward(cl, x, P)
                loss = loss + cfg.lam1 * ce(z_loc, labels, ckr[j]) - l1(z_glob, z_loc.detach(), labels, ckr[j])
            loss.backward()
            opt_g.step()
        gen.eval()
        with torch.no_grad():
            x = gen(z, labels)
            P = knn_graph(x, cfg.topk)
            z_locs = [gcn_forward(cl, x, P) for cl in clients]
        for _ in range(cfg.it_d):
            opt_d.zero_grad()
            z_glob = gcn_forward(params, x, P, dropout=tconf.dropout, training=True, generator=g)
            sum(l1(z_glob, zl, labels, ckr[j]) for j, zl in enumerate(z_locs)).backward()
            opt_d.step()
    return {k: v.detach() for k, v in params.items()}


@pytest.mark.parametrize("num_gen", [30, 2])  # 2 < C: a class without pseudo nodes
def test_fedtad_vectorised_distillation_matches_loop(fg, num_gen):
    torch.manual_seed(0)
    tad = make_method("fedtad", glb_epochs=3, it_d=2, num_gen=num_gen, topk=2)
    ctx = _ctx(fg)
    tad.prepare(ctx)
    g = torch.Generator().manual_seed(3)
    clients = [{k: v[j] + 0.3 * torch.randn(v[j].shape, generator=g) for k, v in ctx.start.items()} for j in range(3)]
    glob = {k: sum(c[k] for c in clients) / 3 for k in clients[0]}
    ckr = ctx.state["ckr"]
    tconf = TrainConfig()
    fast = tad.distill(glob, clients, ckr, fg.num_features, fg.num_classes, tconf, 11)
    slow = _loop_distill(tad.cfg, glob, clients, ckr, fg.num_features, fg.num_classes, tconf, 11)
    for k in slow:
        torch.testing.assert_close(fast[k], slow[k], rtol=0, atol=1e-6)
    assert max(float((fast[k] - glob[k]).abs().max()) for k in glob) > 1e-4  # the distillation moved it
