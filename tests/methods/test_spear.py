"""SPEAR core (pace_nb.methods.spear.core) and perturbations (pace_nb.data.perturb): math against hand computations."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.utils import subgraph

from pace_nb.core.errors import ConfigError, PaceNBError, UnknownNameError
from pace_nb.data import perturb
from pace_nb.methods.spear import core as spear

from synthetic import PARTS3, make_fed


# ----------------------------------------------------------------------------- shrinkage
def test_lambda_limits_and_values():
    n = torch.tensor([0, 1, 10, 10**9])
    lam = spear.shrinkage_lambda(n, 0.1)
    assert torch.allclose(lam, torch.tensor([1.0, 1 / 1.1, 0.5, 1 / (1 + 1e8)]))


def _random_uploads(K=4, C=3, F=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(K, C, F, generator=g)
    N = torch.tensor([[5, 0, 1], [3, 0, 0], [0, 0, 7], [2, 4, 0]])
    return P * (N > 0).unsqueeze(-1), N


def test_peer_means_by_hand():
    P, N = _random_uploads()
    pm = spear.peer_means(P, N)
    # class 0 holders {0,1,3}: peer of client 0 = mean(P1, P3)
    assert torch.allclose(pm[0, 0], (P[1, 0] + P[3, 0]) / 2)
    assert torch.allclose(pm[3, 0], (P[0, 0] + P[1, 0]) / 2)
    # class 1 only client 3 holds it: peer = own prototype (shrinkage disabled)
    assert torch.allclose(pm[3, 1], P[3, 1])
    # class 2 holders {0, 2}
    assert torch.allclose(pm[0, 2], P[2, 2]) and torch.allclose(pm[2, 2], P[0, 2])


@pytest.mark.parametrize("gamma", [1e-9, 1e9])
def test_calibrated_prototype_limits(gamma):
    P, N = _random_uploads()
    Pt = spear.calibrate(P, N, gamma)
    pm = spear.peer_means(P, N)
    held = N > 0
    if gamma < 1:   # n·γ → 0: λ → 1, the peer mean
        assert torch.allclose(Pt[held], pm[held], atol=1e-6)
    else:           # n·γ → ∞: λ → 0, the local prototype
        assert torch.allclose(Pt[held], P[held], atol=1e-6)
    # single holder (class 1): calibrated == local for any γ
    assert torch.allclose(Pt[3, 1], P[3, 1])


def test_global_prototype_count_weighting_by_hand():
    P, N = _random_uploads()
    gamma = 0.3
    g, present = spear.global_prototypes(P, N, gamma)
    assert present.tolist() == [True, True, True]
    # class 0 by hand
    lam = lambda n: 1 / (1 + gamma * n)
    peers = {0: (P[1, 0] + P[3, 0]) / 2, 1: (P[0, 0] + P[3, 0]) / 2, 3: (P[0, 0] + P[1, 0]) / 2}
    num = sum(N[k, 0] * ((1 - lam(N[k, 0])) * P[k, 0] + lam(N[k, 0]) * peers[k]) for k in (0, 1, 3))
    ref = num / num.norm()
    assert torch.allclose(g[0], ref, atol=1e-6)
    # pooled = count-weighted raw prototypes; mean = unweighted mean of holders
    gp, _ = spear.global_prototypes(P, N, gamma, "pooled")
    ref_p = (5 * P[0, 0] + 3 * P[1, 0] + 2 * P[3, 0])
    assert torch.allclose(gp[0], ref_p / ref_p.norm(), atol=1e-6)
    gm, _ = spear.global_prototypes(P, N, gamma, "mean")
    ref_m = (P[0, 0] + P[1, 0] + P[3, 0])
    assert torch.allclose(gm[0], ref_m / ref_m.norm(), atol=1e-6)
    with pytest.raises(UnknownNameError, match="aggregation"):
        spear.global_prototypes(P, N, gamma, "median")


# ----------------------------------------------------------------------------- propagation
def test_ppr_a0_and_T0_equal_normalized_features():
    fg = make_fed(PARTS3)
    x, ei = fg.data.x, fg.data.edge_index
    xt = x / x.norm(dim=1, keepdim=True)
    assert torch.allclose(spear.ppr_propagate(x, ei, T=0, a=0.7), xt)
    assert torch.allclose(spear.ppr_propagate(x, ei, T=3, a=0.0), xt)


def test_ppr_against_dense_hand_computation():
    fg = make_fed(PARTS3)
    x, ei, n = fg.data.x, fg.data.edge_index, fg.data.num_nodes
    A = torch.zeros(n, n)
    A[ei[0], ei[1]] = 1.0
    A = A + torch.eye(n)
    Ah = A / A.sum(1, keepdim=True)
    xt = x / x.norm(dim=1, keepdim=True)
    z = xt
    for _ in range(3):
        z = 0.4 * xt + 0.6 * Ah @ z
    assert torch.allclose(spear.ppr_propagate(x, ei, T=3, a=0.6), z, atol=1e-5)
    # duplicate edges and explicit self loops do not change Â (binary A + I)
    dup = torch.cat([ei, ei, torch.arange(n).repeat(2, 1)], 1)
    assert torch.allclose(spear.ppr_propagate(x, dup, T=3, a=0.6), z, atol=1e-5)


def test_zero_feature_rows_stay_zero():
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    assert torch.equal(spear.normalize_rows(x), torch.tensor([[0.0, 0.0], [0.6, 0.8]]))


# ----------------------------------------------------------------------------- prototypes
def test_client_prototypes_by_hand():
    fg = make_fed(PARTS3)
    cfg = spear.SpearConfig(T=2, a=0.5)
    P, N = spear.client_prototypes(fg, cfg.T, cfg.a)
    c = fg.clients[1]
    z = spear.ppr_propagate(c.x, c.edge_index, 2, 0.5)
    for cls in range(fg.num_classes):
        rows = [i for i in range(c.num_nodes) if c.train_mask[i] and c.y[i] == cls]
        assert N[1, cls] == len(rows)
        if rows:
            assert torch.allclose(P[1, cls], z[rows].mean(0), atol=1e-6)
        else:
            assert torch.all(P[1, cls] == 0)
    # the client PPR runs on the client subgraph only (cross-client edges dropped)
    zg = spear.global_representation(fg, 2, 0.5)[c.global_ids]
    assert not torch.allclose(z, zg)


def test_class_absent_from_every_client_is_never_predicted():
    fg = make_fed(PARTS3)
    for c in fg.clients:  # nobody trains on class 3
        c.train_mask &= c.y != 3
    res = spear.run_spear(fg)
    assert res.present.tolist() == [True, True, True, False]
    assert torch.all(res.g[3] == 0) and res.N[:, 3].sum() == 0
    assert not bool((res.pred == 3).any())
    assert np.isfinite(res.acc)


def test_no_training_nodes_at_all_is_a_clear_error():
    fg = make_fed(PARTS3, empty_train=(0, 1, 2))
    with pytest.raises(PaceNBError, match="no global prototype"):
        spear.run_spear(fg)


def test_empty_clients_contribute_nothing():
    base = make_fed(PARTS3)
    ref = spear.run_spear(base)
    # a client with no nodes and a client with no training nodes
    fg = make_fed(PARTS3 + [[]], empty_train=(3,))
    fg2 = make_fed([range(0, 20), range(20, 40), range(40, 50), range(50, 60)], empty_train=(3,))
    res = spear.run_spear(fg)
    assert res.N[3].sum() == 0 and torch.all(res.P[3] == 0)
    assert torch.allclose(res.g, ref.g, atol=1e-6) and torch.equal(res.pred, ref.pred)
    res2 = spear.run_spear(fg2)
    assert res2.N[3].sum() == 0
    assert spear.upload_bytes(res2.P, res2.N)[3] == 0


# ----------------------------------------------------------------------------- end to end
def test_variants_and_config_validation():
    fg = make_fed(PARTS3)
    out = {v: spear.run_spear(fg, variant=v) for v in spear.VARIANTS}
    assert out["no_ppr"].config.T == 0 and out["full"].config.T == 2
    # w/o both = pooled class means of X̃ over all training nodes
    tr = fg.global_mask("train")
    xt = spear.normalize_rows(fg.data.x)
    pooled = torch.stack([xt[tr & (fg.data.y == c)].mean(0) for c in range(fg.num_classes)])
    assert torch.allclose(out["no_both"].g, spear.normalize_rows(pooled), atol=1e-5)
    assert all(0.0 <= r.acc <= 1.0 for r in out.values())
    with pytest.raises(UnknownNameError, match="variant"):
        spear.run_spear(fg, variant="nope")
    for bad in (dict(T=-1), dict(a=1.0), dict(gamma=0.0), dict(T=1.5)):
        with pytest.raises(ConfigError):
            spear.SpearConfig(**bad)


def test_upload_bytes_are_real_serialization():
    fg = make_fed(PARTS3)
    P, N = spear.client_prototypes(fg)
    import io
    raw = spear.serialize_upload(P[0], N[0])
    back = np.load(io.BytesIO(raw))
    held = (N[0] > 0).nonzero().flatten().numpy()
    assert np.array_equal(back["classes"], held)
    assert np.allclose(back["prototypes"], P[0, held].numpy())
    assert back["prototypes"].dtype == np.float32
    assert spear.upload_bytes(P, N)[0] == len(raw) > back["prototypes"].nbytes


def test_select_hyperparameters_uses_validation_only():
    fg = make_fed(PARTS3)
    cfg, df = spear.select_hyperparameters(fg, a_grid=(0.0, 0.5), gamma_grid=(0.1, 1.0))
    assert len(df) == 4 and set(df.columns) == {"a", "gamma", "val_acc"}
    assert df["val_acc"].max() == pytest.approx(100 * spear.run_spear(fg, cfg).val_acc)
    # scrambling test labels does not change the choice
    fg.data.y = fg.data.y.clone()
    te = fg.global_mask("test")
    fg.data.y[te] = (fg.data.y[te] + 1) % fg.num_classes
    cfg2, df2 = spear.select_hyperparameters(fg, a_grid=(0.0, 0.5), gamma_grid=(0.1, 1.0))
    assert cfg2 == cfg and df2.equals(df)
    with pytest.raises(ConfigError):
        spear.select_hyperparameters(fg, a_grid=(), gamma_grid=(0.1,))


# ----------------------------------------------------------------------------- perturbations
def test_edge_perturbation_is_undirected_and_mixed():
    fg = make_fed(PARTS3)
    ei, n = fg.data.edge_index, fg.data.num_nodes
    before = {tuple(p) for p in perturb.undirected_pairs(ei).tolist()}
    out = perturb.perturb_edges(ei, n, rho=0.5, seed=3)
    after = {tuple(p) for p in perturb.undirected_pairs(out).tolist()}
    # undirected: every (u, v) has (v, u); no self loops
    s = set(map(tuple, out.T.tolist()))
    assert all((v, u) in s for u, v in s) and all(u != v for u, v in s)
    m = round(0.5 * len(before))
    assert len(before - after) == m // 2 and len(after - before) == m - m // 2
    assert torch.equal(out, perturb.perturb_edges(ei, n, rho=0.5, seed=3))  # seeded
    assert not torch.equal(out, perturb.perturb_edges(ei, n, rho=0.5, seed=4))
    with pytest.raises(ConfigError, match="rho"):
        perturb.perturb_edges(ei, n, rho=1.5)


def test_feature_masking_share():
    x = torch.rand(400, 50) + 0.1
    xm = perturb.mask_features(x, 0.5, seed=1)
    share = float((xm == 0).float().mean())
    assert abs(share - 0.5) < 0.02
    kept = xm != 0
    assert torch.equal(xm[kept], x[kept])
    assert torch.equal(perturb.mask_features(x, 0.0, seed=1), x)
    with pytest.raises(ConfigError, match="eta"):
        perturb.mask_features(x, -0.1)
    xn = perturb.mask_features(x, 0.5, seed=2, mode="node")
    rows = (xn == 0).all(1)
    assert int(rows.sum()) == 200 and torch.equal(xn[~rows], x[~rows])
    xc = perturb.mask_features(x, 0.3, seed=2, mode="column")
    cols = (xc == 0).all(0)
    assert int(cols.sum()) == 15 and torch.equal(xc[:, ~cols], x[:, ~cols])
    with pytest.raises(UnknownNameError, match="masking mode"):
        perturb.mask_features(x, 0.5, mode="block")


def test_perturb_federated_reinduces_clients():
    fg = make_fed(PARTS3)
    pf = perturb.perturb_federated(fg, rho=0.5, eta=0.3, seed=0, scope="global")
    assert torch.equal(pf.global_mask("test"), fg.global_mask("test"))
    for c, p in zip(fg.clients, pf.clients, strict=True):
        ref, _ = subgraph(c.global_ids, pf.data.edge_index, relabel_nodes=True, num_nodes=fg.data.num_nodes)
        assert torch.equal(p.edge_index, ref) and torch.equal(p.x, pf.data.x[c.global_ids])
        assert torch.equal(p.train_mask, c.train_mask)
    assert not torch.equal(fg.data.x, pf.data.x)  # the original is untouched
    assert fg.data.x.ne(0).all()


# ----------------------------------------------------------------------------- OpenFGL client-scope noise
def test_client_edge_noise_counts_are_exact():
    fg = make_fed(PARTS3)
    for c in fg.clients:
        before = {tuple(p) for p in perturb.undirected_pairs(c.edge_index).tolist()}
        out = perturb.perturb_client_edges(c.edge_index, c.num_nodes, 0.5, seed=(7, c.index))
        after = {tuple(p) for p in perturb.undirected_pairs(out).tolist()}
        m = round(0.5 * len(before))
        free = c.num_nodes * (c.num_nodes - 1) // 2 - len(before)
        assert len(before - after) == m and len(after - before) == min(m, free)
        assert all(0 <= u < v < c.num_nodes for u, v in after)
        s = set(map(tuple, out.T.tolist()))
        assert all((v, u) in s for u, v in s) and all(u != v for u, v in s)
    # a 5-node path: |E| = 4, round(0.5 · 4) = 2 deleted and 2 added
    path = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])
    und = perturb.undirected_pairs(perturb.perturb_client_edges(path, 5, 0.5, seed=1))
    assert len(und) == 4 and len({tuple(p) for p in und.tolist()} & {(0, 1), (1, 2), (2, 3), (3, 4)}) == 2
    # a triangle has no non-edge: deletions only
    tri = torch.tensor([[0, 1, 1, 2, 0, 2], [1, 0, 2, 1, 2, 0]])
    assert len(perturb.undirected_pairs(perturb.perturb_client_edges(tri, 3, 1.0, seed=0))) == 0


def test_nnz_feature_noise_zeroes_int_eta_nnz_per_node():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(60, 30, generator=g) < 0.3).float() * (1 + torch.rand(60, 30, generator=g))
    for eta in (0.5, 0.3, 1.0):
        xm = perturb.mask_features(x, eta, seed=3, mode="nnz")
        nnz, left = (x != 0).sum(1), (xm != 0).sum(1)
        assert torch.equal(nnz - left, torch.tensor([int(eta * int(n)) for n in nnz]))
        kept = xm != 0
        assert torch.equal(xm[kept], x[kept]) and not bool(((x == 0) & (xm != 0)).any())
    assert torch.equal(perturb.mask_features(x, 0.5, seed=3, mode="nnz"), perturb.mask_features(x, 0.5, seed=3, mode="nnz"))


def test_client_scope_keeps_the_evaluation_graph_clean():
    fg = make_fed(PARTS3)
    pf = perturb.perturb_federated(fg, rho=0.5, eta=0.5, seed=0)  # scope="clients" by default
    assert pf.config["perturb"]["scope"] == "clients" and pf.config["perturb"]["mask_mode"] == "nnz"
    assert torch.equal(pf.data.edge_index, fg.data.edge_index) and torch.equal(pf.data.x, fg.data.x)
    for c, p in zip(fg.clients, pf.clients, strict=True):
        assert torch.equal(p.train_mask, c.train_mask) and torch.equal(p.global_ids, c.global_ids)
        assert torch.equal((c.x != 0).sum(1) - (p.x != 0).sum(1), ((c.x != 0).sum(1) * 0.5).long())
        assert torch.equal(p.edge_index, perturb.perturb_client_edges(c.edge_index, c.num_nodes, 0.5, (0, c.index)))
    with pytest.raises(UnknownNameError, match="scope"):
        perturb.perturb_federated(fg, rho=0.5, scope="server")
