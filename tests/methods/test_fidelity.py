"""Fidelity-pass methods against small hand computations (docs/DESIGN.md §12): FedPub's OpenFGL model,
embedding and similarity diagonal; FedRCL's released loss; FedNova's momentum a_k; FedAux's
[h ‖ z] head."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pace_nb.methods.baselines import make_method, train_federated
from pace_nb.methods.baselines.fedpub import functional_embedding, prune_masks, similarity_weights
from pace_nb.nn.gcn import batch_graphs, batched_forward, gcn_forward, propagation_matrix, stack_params
from pace_nb.nn.training import TrainConfig

from demo_graphs import SEED, demo_fg


@pytest.fixture(scope="module")
def fg():
    return demo_fg()


def _tiny(seed=0, F=5, H=4, C=3, head=True):
    g = torch.Generator().manual_seed(seed)
    p = {"conv1.weight": torch.randn(H, F, generator=g), "conv1.bias": torch.randn(H, generator=g),
         "conv2.weight": torch.randn(H if head else C, H, generator=g), "conv2.bias": torch.randn(H if head else C, generator=g)}
    if head:
        p["lin.weight"], p["lin.bias"] = torch.randn(C, H, generator=g), torch.randn(C, generator=g)
    for k in [k for k in p if k.endswith("weight")]:
        p[k.replace("weight", "mask")] = torch.rand(p[k].shape, generator=g)
    return p


def _graph(n=6):
    ei = torch.tensor([[0, 1, 1, 2, 3, 4, 4, 5], [1, 0, 2, 1, 4, 3, 5, 4]])
    P = propagation_matrix(ei, n)
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(9))
    return x, P, P.to_dense().numpy()


def test_fedpub_three_layer_forward_and_embedding_by_hand():
    p, (x, P, Pd) = _tiny(), _graph()
    n = {k: v.numpy().astype(np.float64) for k, v in p.items()}
    xn = x.numpy().astype(np.float64)
    relu = lambda a: np.maximum(a, 0)
    h1 = relu(Pd @ xn @ (n["conv1.weight"] * n["conv1.mask"]).T + n["conv1.bias"])
    h2 = Pd @ h1 @ (n["conv2.weight"] * n["conv2.mask"]).T + n["conv2.bias"]
    z = relu(h2) @ (n["lin.weight"] * n["lin.mask"]).T + n["lin.bias"]
    np.testing.assert_allclose(gcn_forward(p, x, P).numpy(), z, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(functional_embedding(p, x, P).numpy(), h2.mean(0), rtol=1e-4, atol=1e-5)  # 64-dim conv2 output
    two = _tiny(head=False)
    t = {k: v.numpy().astype(np.float64) for k, v in two.items()}
    g1 = relu(Pd @ xn @ (t["conv1.weight"] * t["conv1.mask"]).T + t["conv1.bias"])
    np.testing.assert_allclose(functional_embedding(two, x, P).numpy(), g1.mean(0), rtol=1e-4, atol=1e-5)  # hidden, not logits
    # the batched trainer's forward agrees with the single-model forward (3-layer model)
    q = _tiny(seed=1)
    g = batch_graphs([x, x], [P, P], sparse=False)
    zb, _ = batched_forward(stack_params([p, q]), g)
    torch.testing.assert_close(zb[0], gcn_forward(p, x, P), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(zb[1], gcn_forward(q, x, P), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layers", [3, 2])
def test_fedpub_run_records_similarity_diagonal(fg, layers):
    run = train_federated(fg, make_method("fedpub", layers=layers), 1, 5, (SEED,), config=TrainConfig(epochs=5),
                          device="cpu", progress=False)
    m = make_method("fedpub", layers=layers)
    from pace_nb.methods.baselines.fedpub import proxy_graph

    x, P = proxy_graph(fg.num_features, SEED)
    pruned = prune_masks(run.trained, 1e-3)
    emb = torch.stack([functional_embedding({k: v[b] for k, v in pruned.items()}, x, P) for b in range(3)])
    assert emb.shape == (3, 64)
    w = similarity_weights(emb, 10.0)
    np.testing.assert_allclose(run.params["similarity_diag"][0], torch.diagonal(w).numpy(), rtol=1e-4)
    json.dumps(run.params)  # recorded with every row
    assert ("lin.weight" in run.returned) == (layers == 3) and m.cfg.layers == layers
    # the receiver keeps its own (pruned) masks; shared weights are S-mixed
    for key in [k for k in run.returned if k.endswith(".mask")]:
        torch.testing.assert_close(run.returned[key], prune_masks(run.trained, 1e-3)[key])
    wf = w.float()
    torch.testing.assert_close(run.returned["conv1.bias"], wf @ run.trained["conv1.bias"], rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- FedAux-1R: [h ‖ z] classifier
def _ctx(fg, seeds=(SEED,)):
    from pace_nb.methods.baselines.base import FedContext
    from pace_nb.nn.gcn import init_params

    w0 = [init_params(fg.num_features, fg.num_classes, 64, s) for s in seeds]
    ctx = FedContext(fg=fg, seeds=tuple(seeds), config=TrainConfig(epochs=5), rounds=1, device=torch.device("cpu"), init=w0)
    ctx.start = stack_params([w for w in w0 for _ in range(fg.num_clients)])
    return ctx


def test_fedaux_concat_head_forward_loss_and_similarity_by_hand(fg):
    import torch.nn.functional as F

    m = make_method("fedaux1r")
    assert m.cfg.head == "concat" and m.cfg.similarity == "params"
    ctx = _ctx(fg)
    m.prepare(ctx)
    start = m.start_models(ctx, ctx.start)
    g = torch.Generator().manual_seed(3)
    trained = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    c = fg.clients[1]
    p1 = {k: v[1] for k, v in trained.items()}
    # forward by hand (dense kernel, float64)
    P = propagation_matrix(c.edge_index, c.num_nodes).to_dense().double()
    d = {k: v.double() for k, v in p1.items()}
    h = torch.relu(P @ c.x.double() @ d["conv1.weight"].T + d["conv1.bias"])
    s = F.cosine_similarity(h, d["aux"].unsqueeze(0), dim=-1)
    kern = torch.exp(-(s[:, None] - s[None, :]) ** 2)
    z = kern @ h / kern.sum(1, keepdim=True)
    logits = P @ (torch.cat([h, z], 1) @ torch.cat([d["conv2.weight"], d["conv2.zweight"]], 1).T) + d["conv2.bias"]
    torch.testing.assert_close(m.eval_forward(p1, c).double(), logits, rtol=1e-3, atol=1e-4)
    # the local objective: trainer CE (plain GCN) + local_loss == CE of the [h ‖ z] logits
    params = {k: v[1:2].clone().requires_grad_(True) for k, v in trained.items()}  # a chunk of one model
    Ps = propagation_matrix(c.edge_index, c.num_nodes)
    zp, hh = gcn_forward({k: v[0] for k, v in params.items()}, c.x, Ps, return_hidden=True)
    tm = c.train_mask

    from pace_nb.nn.training import TrainStep

    step = TrainStep(params, [hh], [zp], [1], [1], 0)
    total = F.cross_entropy(zp[tm], c.y[tm]) + m.local_loss(step, ctx)
    want = F.cross_entropy(logits[tm].float(), c.y[tm])
    assert float(total.detach()) == pytest.approx(float(want), rel=1e-4)
    total.backward()
    assert params["aux"].grad[0].abs().sum() > 0 and params["conv2.zweight"].grad[0].abs().sum() > 0
    # server: exp(10 cos) over ALL shared parameters, the auxiliary vector and W_z included
    out = m.aggregate(ctx, trained, {})
    flat = torch.cat([trained[k].flatten(1) for k in m.shared_keys], 1)
    torch.testing.assert_close(ctx.state["weights"][0], similarity_weights(flat, 10.0))
    assert "conv2.zweight" in m.shared_keys and "aux" in m.shared_keys
    zw = trained["conv2.zweight"]
    torch.testing.assert_close(out["conv2.zweight"], (ctx.state["weights"][0].float() @ zw.flatten(1)).view(zw.shape))


def test_fedaux_run_evaluates_with_the_concat_head(fg):
    from pace_nb.methods.baselines import evaluate_run
    from pace_nb.nn.training import train_local

    cfg = TrainConfig(epochs=5)
    local = train_local(fg, (SEED,), cfg, device="cpu", progress=False)
    run = train_federated(fg, "fedaux1r", 1, 5, (SEED,), config=cfg, local=local, device="cpu", progress=False)
    assert run.forward is not None and "conv2.zweight" in run.returned
    assert len(run.params["similarity_diag"][0]) == fg.num_clients
    rows = evaluate_run(fg, run, local, variants=("native",))
    m = make_method("fedaux1r")
    for r in [r for r in rows if r["receiver"] >= 0]:
        k = r["receiver"]
        c = fg.clients[k]
        pred = m.eval_forward(run.model(0, k), c).argmax(1)
        assert r["acc"] == pytest.approx(100 * float((pred[c.test_mask] == c.y[c.test_mask]).float().mean()))


# ----------------------------------------------------------------------------- FedNova-SGD (diagnostic)
def test_fednova_momentum_a_matches_the_unrolled_momentum_recursion():
    from pace_nb.methods.baselines.fednova import momentum_a, momentum_norm

    rho, tau = 0.9, 7
    # unroll v_t = ρ v_{t−1} + g_t, x_t = x_{t−1} − η v_t with one-hot "gradients": the coefficient of g_j in
    # x_τ − x_0 (divided by −η) is a_j
    coef = np.zeros(tau)
    for j in range(tau):
        v, total = 0.0, 0.0
        for t in range(tau):
            v = rho * v + (1.0 if t == j else 0.0)
            total += v
        coef[j] = total
    np.testing.assert_allclose(momentum_a(tau, rho).numpy(), coef, rtol=1e-12)
    closed = (tau - rho * (1 - rho**tau) / (1 - rho)) / (1 - rho)
    assert float(momentum_norm(tau, rho)) == pytest.approx(closed, rel=1e-12)
    assert float(momentum_norm(tau, rho)) == pytest.approx(coef.sum(), rel=1e-12)
    assert float(momentum_norm(5, 0.0)) == pytest.approx(5.0)  # plain SGD: ‖a‖₁ = τ


def test_fednova_sgd_trains_with_momentum_sgd_and_normalizes(fg):
    from pace_nb.nn.gcn import init_params
    from pace_nb.nn.training import train_models

    cfg = TrainConfig(epochs=4, dropout=0.0)
    run = train_federated(fg, "fednova_sgd", 1, 4, (SEED,), config=cfg, device="cpu", progress=False)
    assert run.params["momentum"] == 0.9
    # the clients' models are momentum-SGD models: compare with torch.optim.SGD on one client
    w0 = init_params(fg.num_features, fg.num_classes, 64, SEED)
    from pace_nb.methods.baselines.base import round_model_seed

    mine, _ = train_models(fg.clients, stack_params([w0]), [round_model_seed(SEED, 0, 0)], [0], cfg, device="cpu",
                           progress=False, optimizer={"name": "sgd", "momentum": 0.9})
    torch.testing.assert_close(run.trained["conv1.weight"][0], mine["conv1.weight"][0])
    ref = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    opt = torch.optim.SGD(list(ref.values()), lr=cfg.lr, momentum=0.9, weight_decay=cfg.weight_decay)
    c = fg.clients[0]
    P = propagation_matrix(c.edge_index, c.num_nodes)
    for _ in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(gcn_forward(ref, c.x, P)[c.train_mask], c.y[c.train_mask]).backward()
        opt.step()
    torch.testing.assert_close(mine["conv2.weight"][0], ref["conv2.weight"].detach(), rtol=1e-4, atol=1e-6)
    # equal step counts → equal ‖a_k‖₁ → the FedNova update is the size-weighted mean (FedAvg)
    p = torch.tensor([c.num_nodes for c in fg.clients], dtype=torch.float64)
    p = (p / p.sum()).float()
    torch.testing.assert_close(run.returned["conv2.bias"][0], (p[:, None] * run.trained["conv2.bias"]).sum(0),
                               rtol=1e-5, atol=1e-6)


def test_no_hyperparameter_shadows_a_setting_key(fg):
    """A hyperparameter named like a row's setting key (e.g. FedRCL's former ``beta``) leaks into that
    key through ``params`` and splits or hides the method's rows in summaries and tables."""
    import dataclasses

    from pace_nb.core.schema import SETTING
    from pace_nb.experiments.store import normalize_rows
    from pace_nb.methods.baselines import method_class, method_names, run_federated

    for name in method_names():
        fields = {f.name for f in dataclasses.fields(method_class(name).Config)}
        assert not fields & set(SETTING), (name, fields & set(SETTING))
    rows = normalize_rows(__import__("pandas").DataFrame(run_federated(
        fg, "fedrcl", (SEED,), 1, 2, config=TrainConfig(epochs=2), device="cpu", progress=False)))
    assert rows["beta"].isna().all()


def test_fedrcl_records_the_predicted_class_entropy_of_its_returned_model(fg):
    """Every FedRCL run records, per seed, the normalised entropy of its returned model's predicted
    classes over the clients' nodes: what tells a majority-class-level row from another."""
    from pace_nb.methods.metrics import predicted_class_entropy
    from pace_nb.nn.training import batched_logits

    seeds = (SEED, SEED + 1)
    run = train_federated(fg, "fedrcl", 1, 3, seeds, config=TrainConfig(epochs=3), device="cpu", progress=False)
    ent = run.params["pred_entropy"]
    assert len(ent) == len(seeds) and all(0.0 <= e <= 1.0 for e in ent)
    k_n = fg.num_clients
    for s in range(len(seeds)):
        models = {n: v[s * k_n:(s + 1) * k_n] for n, v in run.returned.items()}
        pred = torch.cat([z.argmax(-1) for z in batched_logits(models, fg.clients, list(range(k_n)))])
        assert ent[s] == pytest.approx(predicted_class_entropy(pred, fg.num_classes), abs=1e-6)
    assert json.loads(json.dumps(run.params))["pred_entropy"] == ent  # stored in the rows' params as is


@pytest.mark.parametrize("method,options", [("fedaux1r", {}), ("fedaux1r", {"head": "aux"}), ("fedrcl", {})])
def test_client_batched_local_losses_equal_the_sum_of_one_model_losses(fg, method, options):
    """FedAux's and FedRCL's local losses over a chunk of several models (two clients, three seeds): the
    loss and every gradient equal those of the models' losses computed one model at a time."""
    from pace_nb.nn.training import TrainStep

    m = make_method(method, **options)
    ctx = _ctx(fg, seeds=(SEED, SEED + 1, SEED + 2))
    m.prepare(ctx)
    start = m.start_models(ctx, ctx.start)
    g = torch.Generator().manual_seed(5)
    base = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    k_n = fg.num_clients
    models = [0, 1, k_n, k_n + 1, 2 * k_n]  # seed-major order: clients 0, 1, 0, 1, 0
    clients = [b % k_n for b in models]

    def forward(params, rows):
        hid, logit, pre = [], [], []
        for j, b in enumerate(rows):
            c = fg.clients[clients[models.index(b)]]
            P = propagation_matrix(c.edge_index, c.num_nodes)
            pre_h = torch.sparse.mm(P, c.x @ params["conv1.weight"][j].T) + params["conv1.bias"][j]
            h = torch.relu(pre_h)
            hid.append(h), pre.append(pre_h)
            logit.append(torch.sparse.mm(P, h @ params["conv2.weight"][j].T) + params["conv2.bias"][j])
        return hid, logit, pre

    batched = {k: v[models].clone().requires_grad_(True) for k, v in base.items()}
    h, z, pre = forward(batched, models)
    whole = m.local_loss(TrainStep(batched, h, z, models, clients, 0, pre), ctx)
    whole.backward()
    total = 0.0
    for j, b in enumerate(models):
        one = {k: v[[b]].clone().requires_grad_(True) for k, v in base.items()}
        h1, z1, p1 = forward(one, [b])
        loss = m.local_loss(TrainStep(one, h1, z1, [b], [clients[j]], 0, p1), ctx)
        loss.backward()
        total += float(loss)
        for k in one:
            if one[k].grad is not None:
                torch.testing.assert_close(batched[k].grad[j], one[k].grad[0], rtol=1e-5, atol=1e-6)
    assert float(whole) == pytest.approx(total, rel=1e-5)
