"""Eval-mode forwards: the per-client graph cache, batched == one at a time == the plain forward,
sparse (CSR) features == their dense product."""
from __future__ import annotations

import torch

from pace_nb.nn import inference
from pace_nb.nn.gcn import gcn_forward, init_params, propagation_matrix, stack_params
from pace_nb.nn.gcn import SPARSE_DENSITY
from pace_nb.nn.inference import batched_logits, client_hidden, client_logits, eval_features

from demo_graphs import demo_fg


def test_client_logits_match_the_dense_forward_and_batched_logits_bitwise():
    fg = demo_fg(k=3)
    ps = stack_params([init_params(fg.num_features, fg.num_classes, 16, s) for s in range(6)])
    client_of = [0, 1, 2, 2, 1, 0]
    batched = batched_logits(ps, fg.clients, client_of)
    for b, k in enumerate(client_of):
        one = {n: v[b] for n, v in ps.items()}
        c = fg.clients[k]
        assert torch.equal(batched[b], client_logits(one, c))
        P = propagation_matrix(c.edge_index, c.num_nodes)
        assert torch.equal(batched[b], gcn_forward(one, eval_features(c.x, "cpu"), P))
        torch.testing.assert_close(batched[b], gcn_forward(one, c.x, P), rtol=1e-5, atol=1e-6)
        _, h = gcn_forward(one, c.x, propagation_matrix(c.edge_index, c.num_nodes), return_hidden=True)
        torch.testing.assert_close(client_hidden(one, c), h, rtol=1e-5, atol=1e-6)


def test_the_graph_cache_follows_in_place_changes_and_new_tensors():
    fg = demo_fg(k=2)
    c = fg.clients[0]
    p = init_params(fg.num_features, fg.num_classes, 8, 0)
    before = client_logits(p, c)
    assert client_logits(p, c) is not before and torch.equal(client_logits(p, c), before)
    x0 = inference._graph(c, "cpu")[0]
    assert inference._graph(c, "cpu")[0] is x0  # built once
    c.x.mul_(2.0)  # in place: the cached features are stale and rebuilt
    doubled = client_logits(p, c)
    want = gcn_forward(p, c.x, propagation_matrix(c.edge_index, c.num_nodes))
    torch.testing.assert_close(doubled, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(doubled, before)
    c.x = c.x / 2.0  # a new tensor: another entry
    torch.testing.assert_close(client_logits(p, c), before, rtol=1e-5, atol=1e-6)


def test_sparse_features_are_held_as_csr_and_give_the_dense_product():
    """Below SPARSE_DENSITY the eval features are CSR with exactly x's entries (empty rows included);
    layer 1 over them (one embedding_bag) equals the dense product up to summation order, also with
    FedPub-style weight masks; dense features stay dense."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(40, 30, generator=g) < SPARSE_DENSITY / 2).float() * torch.rand(40, 30, generator=g)
    x[[0, 7, 39]] = 0.0
    csr = eval_features(x, "cpu")
    assert csr.layout == torch.sparse_csr and torch.equal(csr.to_dense(), x)
    assert eval_features(x.to_sparse(), "cpu").layout == torch.sparse_csr
    dense_x = torch.rand(10, 6, generator=g) + 0.1
    assert eval_features(dense_x, "cpu").layout == torch.strided and torch.equal(eval_features(dense_x, "cpu"), dense_x)
    ei = torch.randint(0, 40, (2, 120), generator=g)
    P = propagation_matrix(ei, 40)
    p = init_params(30, 4, 8, 3)
    p["conv1.mask"] = (torch.rand(8, 30, generator=g) < 0.7).float()
    for params in (p, {k: v for k, v in p.items() if k != "conv1.mask"}):
        z_sparse, h_sparse = gcn_forward(params, csr, P, return_hidden=True)
        z_dense, h_dense = gcn_forward(params, x, P, return_hidden=True)
        torch.testing.assert_close(z_sparse, z_dense, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(h_sparse, h_dense, rtol=1e-5, atol=1e-6)
