"""OASIS (pace_nb.methods.oneshot.oasis) — the math against hand computations, the upload
(teacher + synthesizer + codebook, nothing from raw features), class-balanced proxy graphs,
determinism — and Centroid-SBM (pace_nb.methods.oneshot.centroid_sbm), the extra baseline
that used to carry OASIS's name, kept at its old numbers and out of SPEAR's comparison."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from pace_nb.methods.oneshot import base, make_oneshot, oasis, run_oneshot
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix
from pace_nb.nn.training import train_local

#: Small budgets for the demo graph (the defaults are the paper's, for real datasets): SMALL
#: exercises the mechanism, TRAINED trains the synthesizers enough to beat the class prior.
SMALL = {"synth_steps": 20, "batch_nodes": 128, "epochs": 3, "codebook_size": 32, "latent_dim": 16,
         "synth_hidden": 64, "proxy_nodes": 300, "sinkhorn_iters": 20}
TRAINED = {**SMALL, "synth_steps": 150, "epochs": 10}


@pytest.fixture(scope="module")
def fg_skew():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="dirichlet", num_clients=10, seed=2024, beta=0.05)


@pytest.fixture(scope="module")
def local(fg_skew):
    return train_local(fg_skew, (0,), progress=False)


def _ctx(fg, local):
    return base.OneShotContext(fg, 0, local.config, torch.device("cpu"), [local.model(0, k) for k in range(fg.num_clients)])


# ----------------------------------------------------------------------------- hand-computed math
def test_sinkhorn_matches_exact_transport_on_two_classes():
    cost = torch.tensor([[0.0, 2.0], [2.0, 0.0]])
    # point masses on different classes: the only plan moves all mass, cost 2
    assert oasis.sinkhorn(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), cost).item() == pytest.approx(2.0, rel=1e-4)
    # two classes: exact OT moves |p0 - q0| = 0.5 across, cost 0.5 * 2 = 1 (entropic ≈ exact at small ε)
    p, q = torch.tensor([[0.7, 0.3]]), torch.tensor([[0.2, 0.8]])
    assert oasis.sinkhorn(p, q, cost, eps=0.01, iters=500).item() == pytest.approx(1.0, abs=1e-2)
    # identical histograms, zero diagonal: nothing to move
    assert oasis.sinkhorn(p, p, cost, eps=0.01, iters=500).item() == pytest.approx(0.0, abs=1e-2)


def test_class_cost_and_wesad_by_hand():
    cost = oasis.class_cost(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]))
    c = 1 - 2 ** -0.5
    assert torch.allclose(cost, torch.tensor([[0.0, c, 1.0], [c, 0.0, c], [1.0, c, 0.0]]), atol=1e-6)
    t = torch.tensor([[1.0, 0.0, 0.0]])
    s = torch.tensor([[0.0, 0.0, 30.0]])  # softmax(s / 3) ≈ all mass on class 2: distance ≈ cost[0, 2]
    assert oasis.wesad_loss(t, s, cost, 3.0).item() == pytest.approx(1.0, abs=1e-3)


def test_quantize_by_hand():
    codebook = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    e = torch.tensor([[0.2, 0.0], [0.9, 1.3]], requires_grad=True)
    q, idx, loss = oasis.quantize(e, codebook, beta=0.25)
    assert idx.tolist() == [0, 1] and torch.allclose(q, codebook)
    sq = (0.04 + (0.01 + 0.09)) / 2  # mean squared distance to the nearest token
    assert loss.item() == pytest.approx(1.25 * sq, rel=1e-6)
    (q.sum()).backward()  # straight-through: dq/de = identity
    assert torch.equal(e.grad, torch.ones_like(e))


def test_balanced_allocation_is_class_balanced_and_proportional():
    counts = torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 5.0]])
    a = oasis.balanced_allocation(counts, 10)
    assert a.sum(0).tolist() == [5, 5] and a.tolist() == [[4, 0], [1, 0], [0, 5]]
    # a tiny count may get no node, so that every class total stays exactly equal
    assert oasis.balanced_allocation(torch.tensor([[1.0], [99.0]]), 10).tolist() == [[0], [10]]
    assert oasis.assignment_logits(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0], [0.0, 2.0]]))[0].tolist() == \
        pytest.approx([0.0, -5.0], abs=1e-5)


def test_settled_budget_by_hand():
    t = torch.tensor([4.0, 4.0, 2.0, 2.0, 1.02, 1.02, 1.0, 1.0])  # windowed (w = 2) means: 4, 2, 1.02, 1
    assert oasis.window_mean(t, 4, 2) == pytest.approx(2.0) and oasis.window_mean(t, 8, 2) == pytest.approx(1.0)
    assert oasis.settled_budget([t], [2, 4, 6, 8], tol=0.05, window=2) == 6  # 1.02 ≤ 1.05, 2 > 1.05
    assert oasis.settled_budget([t], [2, 4, 6, 8], tol=1.5, window=2) == 4
    flat = torch.full((8,), 3.0)  # every trace must have settled
    assert oasis.settled_budget([flat, t], [2, 4, 6], tol=0.05, window=2) == 6
    assert oasis.settled_budget([t], [2, 4], tol=0.05, window=2) is None
    with pytest.raises(ValueError, match="step"):
        oasis.window_mean(t, 9)


def test_synthesizer_trace_is_the_objective_and_does_not_depend_on_the_budget(fg_skew, local, one_thread):
    ctx = _ctx(fg_skew, local)
    k = next(i for i, c in enumerate(fg_skew.clients) if bool(c.train_mask.any()))
    short = make_oneshot("oasis", **{**SMALL, "synth_steps": 10})
    synth, codebook, _, tr = short.train_synthesizer(ctx, k, fg_skew.clients[k])
    _, _, _, tr2 = make_oneshot("oasis", **{**SMALL, "synth_steps": 30}).train_synthesizer(ctx, k, fg_skew.clients[k])
    assert tr.shape == (10,) and torch.equal(tr2[:10], tr)  # step t's objective is the same whatever the budget
    # step 0's entry is the objective recomputed by hand from the untrained synthesizer: teacher CE
    # + class-mean matching of layer-1 representations and features against training nodes + VQ
    c, cfg = fg_skew.clients[k], short.cfg
    teacher = {n: local.model(0, k)[n] for n in WEIGHT_KEYS}
    x, y, m = c.x.float(), c.y.long(), c.train_mask
    held = torch.nonzero(base.label_counts(c, fg_skew.num_classes) > 0).flatten()
    _, h_real = gcn_forward(teacher, x, propagation_matrix(c.edge_index, c.num_nodes), return_hidden=True)
    gen, s0 = ctx.generator(k, salt=11), short._synthesizer(ctx, int(ctx.generator(k, salt=12).initial_seed()) % (2**31))
    batch = held.repeat_interleave(-(-cfg.batch_nodes // len(held)))[:cfg.batch_nodes]
    book = s0.latent(held.repeat_interleave(-(-cfg.codebook_size // len(held)))[:cfg.codebook_size], gen)
    e = s0.latent(batch, gen)
    tok = torch.cdist(e, book).argmin(1)
    vq = 1.25 * ((e - book[tok]) ** 2).sum(1).mean()
    xs = s0.features(book[tok], base.is_binary(c.x))
    logits, h = gcn_forward(teacher, xs, propagation_matrix(base.knn_graph(e, cfg.knn), len(batch)), return_hidden=True)
    stat = sum(((oasis.class_means(a, batch, held) - oasis.class_means(b[m], y[m], held)) ** 2).sum(1).mean()
               for a, b in ((h, h_real), (xs, x)))
    assert tr[0].item() == pytest.approx((F.cross_entropy(logits, batch) + stat + vq).item(), rel=1e-6)
    msg = short.client_message(ctx, k, fg_skew.clients[k])  # the upload is the traced synthesizer
    assert torch.equal(msg["codebook"], codebook)
    assert all(torch.equal(msg[f"synth.{n}"], v) for n, v in synth.state_dict().items())
    assert make_oneshot("oasis", **{**SMALL, "synth_steps": 0}).train_synthesizer(ctx, k, fg_skew.clients[k])[3].numel() == 0


# ----------------------------------------------------------------------------- the upload
def test_upload_is_teacher_synthesizer_and_codebook(fg_skew, local, one_thread):
    method = make_oneshot("oasis", **SMALL)
    ctx = _ctx(fg_skew, local)
    k = next(i for i, c in enumerate(fg_skew.clients) if bool(c.train_mask.any()))
    msg = method.client_message(ctx, k, fg_skew.clients[k])
    synth = method._synthesizer(ctx, 0)
    want = {f"teacher.{n}" for n in WEIGHT_KEYS} | {f"synth.{n}" for n in synth.state_dict()} | {"codebook", "counts", "binary"}
    assert set(msg) == want  # nothing else: no centroids, no feature statistics, no raw rows
    for n in WEIGHT_KEYS:  # the teacher is the client's trained Local GCN
        assert torch.equal(msg[f"teacher.{n}"], local.model(0, k)[n])
    assert msg["codebook"].shape == (SMALL["codebook_size"], SMALL["latent_dim"])
    assert msg["synth.head.0.weight"].shape == (fg_skew.num_features, SMALL["latent_dim"])
    assert len([m for m in synth.trunk if isinstance(m, torch.nn.Linear)]) == 3  # 3 hidden layers, the last = latent
    # the synthesizer was trained (moved away from its seeded start) and its bytes all travel
    assert any(not torch.equal(msg[f"synth.{n}"], v) for n, v in method._synthesizer(ctx, int(
        ctx.generator(k, salt=12).initial_seed()) % (2**31)).state_dict().items())
    floats = sum(v.numel() for v in msg.values())
    teacher_bytes = 4 * sum(msg[f"teacher.{n}"].numel() for n in WEIGHT_KEYS)
    blob = base.encode(msg)
    assert len(blob) >= 4 * floats > teacher_bytes and len(blob) - 4 * floats < 4096
    assert torch.equal(base.decode(blob)["codebook"], msg["codebook"])


def test_proxy_graphs_are_class_balanced_and_labelled_by_the_synthesizers(fg_skew, local, one_thread):
    method = make_oneshot("oasis", **{**SMALL, "proxy_nodes": 240})
    ctx = _ctx(fg_skew, local)
    msgs = [base.decode(base.encode(method.client_message(ctx, k, c))) for k, c in enumerate(fg_skew.clients)
            if bool(c.train_mask.any())]
    synths = [base.load_module("synth", method._synthesizer(ctx, 0), m) for m in msgs]
    graphs = method.proxy_graphs(ctx, msgs, synths, torch.Generator().manual_seed(0))
    held = torch.stack([m["counts"] for m in msgs]).sum(0) > 0
    y = torch.cat([g[2] for g in graphs if g is not None])
    per_class = torch.bincount(y, minlength=fg_skew.num_classes)
    assert per_class[held].tolist() == [240 // int(held.sum())] * int(held.sum()) and int(per_class[~held].sum()) == 0
    for m, g in zip(msgs, graphs, strict=True):
        if g is None:
            continue
        x, P, yk, idx = g
        assert set(yk.tolist()) <= set(torch.nonzero(m["counts"] > 0).flatten().tolist())  # only classes it held
        assert x.shape == (len(yk), fg_skew.num_features) and P.shape == (len(yk), len(yk))
        assert int(idx.max()) < SMALL["codebook_size"]


# ----------------------------------------------------------------------------- end to end
def test_trained_beats_untrained_and_runs_are_repeatable(fg_skew, local, one_thread):
    y = fg_skew.data.y.view(-1)
    prior = 100.0 * float((y[fg_skew.global_mask("test")] == int(torch.bincount(y[fg_skew.global_mask("train")]).argmax())
                           ).float().mean())
    a = run_oneshot(fg_skew, make_oneshot("oasis", **SMALL), (0,), local=local, progress=False)[0]
    b = run_oneshot(fg_skew, make_oneshot("oasis", **SMALL), (0,), local=local, progress=False)[0]
    assert a["acc"] == b["acc"] and a["bytes_up"] == b["bytes_up"] and a["f1_macro"] == b["f1_macro"]
    good = run_oneshot(fg_skew, make_oneshot("oasis", **TRAINED), (0,), local=local, progress=False)[0]
    bad = run_oneshot(fg_skew, make_oneshot("oasis", **{**TRAINED, "synth_steps": 0}), (0,), local=local,
                      progress=False)[0]  # synthesizer and codebook never trained
    assert good["acc"] > prior + 5.0 > bad["acc"], (good["acc"], prior, bad["acc"])
    teacher = 4 * sum(v.numel() for v in local.model(0, 0).values())
    sent = [n for n in json.loads(a["params"])["bytes_per_client"] if n]
    assert min(sent) > teacher


def test_bad_hyperparameters_are_clear_errors():
    from pace_nb.core.errors import ConfigError

    with pytest.raises(ConfigError, match="codebook_size"):
        make_oneshot("oasis", codebook_size=0)
    with pytest.raises(ConfigError, match="temperature"):
        make_oneshot("oasis", temperature=0.0)
    assert make_oneshot("oasis").cfg.temperature == 3.0 and 10 <= make_oneshot("oasis").cfg.epochs <= 30


# ----------------------------------------------------------------------------- Centroid-SBM (extra)
#: Regression value: accuracy of the former ``oasis`` code path (class-wise k-means centroids +
#: code-to-code edge counts → SBM graph), computed by that code on the demo federation below
#: (Dirichlet β = 0.05, K = 10, data seed 2024, run seed 0) before it was renamed centroid_sbm.
OLD_CODE_ACC, OLD_CODE_BYTES = 87.62886597938144, 238872


def test_centroid_sbm_keeps_the_old_numbers_and_stays_out_of_spears_comparison(fg_skew, one_thread):
    from pace_nb.viz.style import method_color
    from pace_nb.methods.registry import group, method_label, spear_comparison

    row = run_oneshot(fg_skew, make_oneshot("centroid_sbm"), (0,), progress=False)[0]
    assert row["acc"] == pytest.approx(OLD_CODE_ACC, abs=1e-9) and row["bytes_up"] == OLD_CODE_BYTES
    assert "centroid_sbm" not in group("oneshot") and "centroid_sbm" not in spear_comparison()
    assert "oasis" in group("oneshot") and method_label("centroid_sbm") == "Centroid-SBM (extra)"
    assert method_color("centroid_sbm") not in {method_color(m) for m in spear_comparison()}  # its own colour
    # its upload does carry class centroids of raw features (what OASIS's upload never does)
    from pace_nb.methods.oneshot import centroid_sbm

    ctx = base.OneShotContext(fg_skew, 0, base.TrainConfig(), torch.device("cpu"))
    k = next(i for i, c in enumerate(fg_skew.clients) if bool(c.train_mask.any()))
    msg = centroid_sbm.CentroidSBM().client_message(ctx, k, fg_skew.clients[k])
    assert msg["codewords"].shape[1] == fg_skew.num_features
    assert F.cosine_similarity(msg["codewords"].mean(0), fg_skew.clients[k].x[fg_skew.clients[k].train_mask].float().mean(0),
                               dim=0) > 0.5
