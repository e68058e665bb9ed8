"""OASIS (pace_nb.methods.oneshot.oasis, .oasis_losses) mechanism by mechanism — W2 between
Gaussians against scipy, the orthogonality term, the commitment gradient, WESAD's cost from the
teacher head, the σ(X̂X̂ᵀ) kNN graph, the codebook's objective, proxy graphs of the local graph's
size, the paper's budget as defaults, the upload — and Centroid-SBM
(pace_nb.methods.oneshot.centroid_sbm), the extra baseline that used to carry OASIS's name, kept
at its old numbers and out of SPEAR's comparison."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pace_nb.methods.oneshot import base, make_oneshot, oasis, run_oneshot
from pace_nb.methods.oneshot import oasis_losses as L
from pace_nb.methods.oneshot.ghost import dense_adjacency
from pace_nb.nn.gcn import WEIGHT_KEYS, propagation_matrix
from pace_nb.nn.training import train_local

#: Small budgets for the demo graph (the defaults are the paper's, for real datasets).
SMALL = {"synth_epochs": 5, "codebook_epochs": 5, "epochs": 3, "synth_hidden": 32, "codebook_size": 16,
         "sinkhorn_iters": 10}


@pytest.fixture(scope="module")
def fg_skew():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="dirichlet", num_clients=10, seed=2024, beta=0.05)


@pytest.fixture(scope="module")
def local(fg_skew):
    return train_local(fg_skew, (0,), progress=False)


def _ctx(fg, local):
    return base.OneShotContext(fg, 0, local.config, torch.device("cpu"), [local.model(0, k) for k in range(fg.num_clients)])


def _first(fg):
    return next(i for i, c in enumerate(fg.clients) if bool(c.train_mask.any()))


# ----------------------------------------------------------------------------- the math
def test_gaussian_w2_against_scipy_and_the_assignment_form():
    from scipy.linalg import sqrtm

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 5)), rng.normal(size=(5, 5))
    c1, c2 = a @ a.T + 0.1 * np.eye(5), b @ b.T + 0.1 * np.eye(5)
    m1, m2 = rng.normal(size=5), rng.normal(size=5)
    s1 = np.real(sqrtm(c1))
    want = np.sum((m1 - m2) ** 2) + np.trace(c1 + c2 - 2 * np.real(sqrtm(s1 @ c2 @ s1)))
    got = L.gaussian_w2(*(torch.tensor(v) for v in (m1, c1, m2, c2)))
    assert got.item() == pytest.approx(want, rel=1e-8)
    assert L.gaussian_w2(torch.tensor(m1), torch.tensor(c1), torch.tensor(m1), torch.tensor(c1)).item() == \
        pytest.approx(0.0, abs=1e-8)
    # WDSRD: the W2 of the assignments' moments, with finite gradients though n < M (rank-deficient)
    bt = F.softmax(torch.tensor(rng.normal(size=(6, 8))), 1)
    bs = F.softmax(torch.tensor(rng.normal(size=(6, 8))), 1).requires_grad_(True)
    w2 = L.assignment_w2(bt, bs)
    assert w2.item() == pytest.approx(L.gaussian_w2(*L.moments(bt), *L.moments(bs.detach())).item(), rel=1e-6, abs=1e-9)
    w2.backward()
    assert torch.isfinite(bs.grad).all() and bs.grad.abs().sum() > 0
    assert L.assignment_w2(bt, bt).item() == pytest.approx(0.0, abs=1e-6)


def test_orthogonality_is_zero_exactly_for_an_orthogonal_codebook():
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(0)))
    assert L.orthogonality(q[:5]).item() == pytest.approx(0.0, abs=1e-10)
    assert L.orthogonality(3.0 * q[:5]).item() == pytest.approx(0.0, abs=1e-10)  # directions only
    parallel = torch.tensor([[1.0, 0.0], [2.0, 0.0]])  # one off-diagonal pair at cosine 1
    assert L.orthogonality(parallel).item() == pytest.approx(2.0 / 4.0)


def test_quantize_commitment_gradient_reaches_the_encoder_and_the_codebook_term_the_codes():
    codebook = torch.tensor([[0.0, 0.0], [1.0, 1.0]], requires_grad=True)
    h = torch.tensor([[0.2, 0.0], [0.9, 1.3]], requires_grad=True)
    q, idx, loss = L.quantize(h, codebook, eta=0.25)
    assert idx.tolist() == [0, 1] and torch.equal(q.detach(), codebook.detach())
    loss.backward()
    diff = h.detach() - codebook.detach()[idx]  # h − e_z
    assert torch.allclose(h.grad, 0.25 * 2 * diff / 2)         # η · ∂‖h − sg e‖² / n
    assert torch.allclose(codebook.grad, -2 * diff / 2)        # ∂‖sg h − e‖² / n (each code chosen once)
    assert loss.item() == pytest.approx(1.25 * float((diff ** 2).sum(1).mean()))


def test_wesad_cost_from_the_teacher_head_and_sinkhorn():
    w = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # rows normalised: e1, e2, (e1 + e2)/√2
    c = 1 - 2 ** -0.5
    want = torch.tensor([[0.0, 1.0, c], [1.0, 0.0, c], [c, c, 0.0]])
    assert torch.allclose(L.head_cost(w, kappa=1.0), want, atol=1e-6)
    assert torch.allclose(L.head_cost(w, kappa=2.0), 2 * want, atol=1e-6)
    cost = torch.tensor([[0.0, 2.0], [2.0, 0.0]])
    p, q = torch.tensor([[0.7, 0.3]]), torch.tensor([[0.2, 0.8]])
    assert L.sinkhorn(p, q, cost, eps=0.01, iters=500).item() == pytest.approx(1.0, abs=1e-2)  # moves 0.5 at cost 2
    t, s = torch.tensor([[30.0, 0.0, 0.0]]), torch.tensor([[0.0, 30.0, 0.0]])  # τ = 3: still ~point masses
    assert L.wesad_loss(t, s, L.head_cost(w), 3.0).item() == pytest.approx(1.0, abs=1e-3)


def test_synthetic_adjacency_is_the_knn_of_sigmoid_inner_products():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.0, 3.0]])
    ei = L.synthetic_adjacency(x, 1)
    # σ(xxᵀ) row maxima off the diagonal: 0→1, 1→0, 2→3, 3→2 (inner products, not cosines)
    assert sorted(map(tuple, ei.T.tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    assert not bool((ei[0] == ei[1]).any())


# ----------------------------------------------------------------------------- the method
def test_defaults_are_the_papers_budget():
    cfg = oasis.Oasis().cfg
    assert (cfg.synth_epochs, cfg.codebook_epochs, cfg.lr, cfg.weight_decay) == (100, 50, 5e-3, 4e-4)
    assert (cfg.eta, cfg.lambda_o, cfg.lambda_c, cfg.kappa, cfg.lambda_k, cfg.temperature) == (0.25, 0.01, 1.0, 1.0, 0.01, 3.0)
    assert cfg.fgw_alpha == 0.5 and cfg.knn == 5 and cfg.codebook_size in (64, 128, 256)
    assert 10 <= cfg.epochs <= 30 and cfg.lambda_s in (1.0, 5.0, 10.0)
    from pace_nb.core.errors import ConfigError

    with pytest.raises(ConfigError, match="codebook_size"):
        make_oneshot("oasis", codebook_size=0)
    with pytest.raises(ConfigError, match="temperature"):
        make_oneshot("oasis", temperature=0.0)


def test_codebook_training_lowers_its_objective_through_both_decoders(fg_skew, local, one_thread):
    ctx = _ctx(fg_skew, local)
    k = _first(fg_skew)
    c = fg_skew.clients[k]
    method = make_oneshot("oasis", **{**SMALL, "codebook_epochs": 20})
    teacher, book = method.train_codebook(ctx, k, c)
    assert book.shape == (16, local.config.hidden)
    assert any(not torch.equal(teacher[n], local.model(0, k)[n]) for n in WEIGHT_KEYS)  # trained with the codebook
    # the objective with the trained teacher + codebook is lower than at their start (same fresh decoders)
    x, P = c.x.float(), propagation_matrix(c.edge_index, c.num_nodes)
    adj, h = dense_adjacency(c.edge_index, c.num_nodes), local.config.hidden

    def objective(theta, codebook):
        dec_x, dec_a = base.mlp([h, fg_skew.num_features], 1), base.mlp([h, h], 2)
        return oasis.codebook_loss(theta, codebook, dec_x, dec_a, x, P, adj, c.y.long(), c.train_mask,
                                   eta=0.25, lambda_o=0.01, lambda_c=1.0).item()

    _, start = make_oneshot("oasis", **{**SMALL, "codebook_epochs": 0}).train_codebook(ctx, k, c)
    assert objective(teacher, book) < objective(local.model(0, k), start)


def test_upload_and_proxy_graphs_of_the_local_graph_size(fg_skew, local, one_thread):
    method = make_oneshot("oasis", **SMALL)
    ctx = _ctx(fg_skew, local)
    k = _first(fg_skew)
    msg = method.client_message(ctx, k, fg_skew.clients[k])
    synth = method.synthesizer(ctx, 0)
    want = {f"teacher.{n}" for n in WEIGHT_KEYS} | {f"synth.{n}" for n in synth.state_dict()} | {"codebook", "nodes"}
    assert set(msg) == want  # no label counts, no feature statistics, no raw rows
    assert len([m for m in synth.net if isinstance(m, torch.nn.Linear)]) == 4  # 3 hidden layers + projection head
    blob = base.encode(msg)
    assert len(blob) >= 4 * sum(v.numel() for v in msg.values())
    x, P, y = method.proxy_graph(ctx, base.decode(blob), torch.Generator().manual_seed(0))
    n = fg_skew.clients[k].num_nodes
    assert x.shape == (n, fg_skew.num_features) and P.shape == (n, n)
    counts = torch.bincount(y, minlength=fg_skew.num_classes)  # class-balanced over every class
    assert int(counts.max() - counts[:-1].min()) <= fg_skew.num_classes and int(counts.sum()) == n


def test_runs_are_repeatable_and_bytes_are_the_uploads(fg_skew, local, one_thread):
    a = run_oneshot(fg_skew, make_oneshot("oasis", **SMALL), (0,), local=local, progress=False)[0]
    b = run_oneshot(fg_skew, make_oneshot("oasis", **SMALL), (0,), local=local, progress=False)[0]
    assert a["acc"] == b["acc"] and a["bytes_up"] == b["bytes_up"] and a["f1_macro"] == b["f1_macro"]
    teacher = 4 * sum(v.numel() for v in local.model(0, 0).values())
    sent = [n for n in json.loads(a["params"])["bytes_per_client"] if n]
    assert min(sent) > teacher and a["bytes_up"] == sum(sent)


def test_diagnostics_read_the_uploaded_teachers_and_the_proxies_labels(fg_skew, local, one_thread):
    """The teachers' ensemble reading equals the mean of the uploaded teachers' logits scored
    independently; the proxy agreement is a share in [0, 100]; both reach the comparison table."""
    from pace_nb.analysis.spear_comparison import teacher_ensemble_rows
    from pace_nb.methods import metrics
    from pace_nb.nn.gcn import gcn_forward

    method = make_oneshot("oasis", **SMALL)
    row = run_oneshot(fg_skew, method, (0,), local=local, progress=False)[0]
    p = json.loads(row["params"])
    assert 0.0 <= p["proxy_label_agreement"] <= 100.0
    ctx = _ctx(fg_skew, local)
    teachers = [method.train_codebook(ctx, k, c)[0] for k, c in enumerate(fg_skew.clients)]
    d, mask = fg_skew.data, fg_skew.global_mask("test")
    P = propagation_matrix(d.edge_index, int(d.num_nodes))
    z = torch.stack([gcn_forward(t, d.x.float(), P) for t in teachers]).mean(0)
    want = metrics.scores(d.y[mask], z.argmax(1)[mask], int(d.y.max()) + 1)["acc"]
    assert p["teacher_ensemble_acc"] == pytest.approx(100 * want)
    import pandas as pd
    rows = pd.DataFrame([row])
    ens = teacher_ensemble_rows(rows.assign(method="oasis"))
    assert list(ens["variant"]) == ["teacher_ensemble"] and ens["acc"].iloc[0] == pytest.approx(p["teacher_ensemble_acc"])


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
