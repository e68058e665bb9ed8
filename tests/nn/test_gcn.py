"""pace_nb.nn.gcn: PyG-identical init, propagation and forward; (un)stacking."""
from __future__ import annotations

import pytest
import torch

from pace_nb.core.errors import ConfigError
from synthetic import PyGGCN, synthetic_client, synthetic_clients
from pace_nb.nn.gcn import (batch_graphs, batched_forward, dropout_mask, dropout_masks_, gcn_forward, init_params, num_params_bytes, propagation_matrix,
                            stack_params, unstack_params)


pytestmark = pytest.mark.usefixtures("one_thread")


# ---- tests ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 104729])
def test_init_params_equals_pyg_and_keeps_global_rng(seed):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    p = init_params(30, 5, hidden=16, seed=seed)
    assert torch.equal(torch.get_rng_state(), state)  # global RNG untouched
    torch.manual_seed(seed)
    ref = PyGGCN(30, 16, 5).params()
    assert set(p) == set(ref)
    for k in ref:
        assert torch.equal(p[k], ref[k]), k
    bound = (6.0 / (30 + 16)) ** 0.5  # glorot
    assert p["conv1.weight"].abs().max() <= bound and p["conv1.weight"].std() > bound / 3
    assert not torch.equal(p["conv1.weight"], init_params(30, 5, 16, seed + 1)["conv1.weight"])


def test_propagation_matrix_matches_gcn_norm_dense():
    c = synthetic_client(0, 20)
    P = propagation_matrix(c.edge_index, 20).to_dense()
    a = torch.zeros(20, 20)
    a[c.edge_index[1], c.edge_index[0]] = 1.0
    a += torch.eye(20)
    d = a.sum(1).pow(-0.5)
    assert torch.allclose(P, d[:, None] * a * d[None, :], atol=1e-6)
    # isolated node keeps only its self loop weight 1
    P2 = propagation_matrix(torch.tensor([[0, 1], [1, 0]]), 3).to_dense()
    assert P2[2, 2] == 1.0 and abs(float(P2[0, 1]) - 0.5) < 1e-6


def test_propagation_matrix_rejects_bad_edges():
    with pytest.raises(ConfigError, match="outside"):
        propagation_matrix(torch.tensor([[0, 5], [5, 0]]), 3)


def test_gcn_forward_equals_pyg_eval():
    c = synthetic_client(1, 35)
    p = init_params(40, 4, 8, seed=3)
    p = {k: v + 0.1 * torch.randn_like(v) for k, v in p.items()}  # non-zero biases
    ref = PyGGCN(40, 8, 4).load(p).eval()
    P = propagation_matrix(c.edge_index, c.num_nodes)
    z, h = gcn_forward(p, c.x, P, return_hidden=True)
    assert torch.allclose(z, ref(c.x, c.edge_index), atol=1e-5)
    assert torch.allclose(h, torch.relu(ref.conv1(c.x, c.edge_index)), atol=1e-5)
    # dense P and sparse x give the same
    assert torch.allclose(gcn_forward(p, c.x.to_sparse(), P.to_dense()), z, atol=1e-5)


def test_gcn_forward_masks_and_dropout():
    c = synthetic_client(2, 30)
    p = init_params(40, 4, 8, seed=1)
    P = propagation_matrix(c.edge_index, c.num_nodes)
    m1 = (torch.rand(8, 40) > 0.5).float()
    masked = dict(p, **{"conv1.mask": m1})
    manual = dict(p, **{"conv1.weight": p["conv1.weight"] * m1})
    assert torch.equal(gcn_forward(masked, c.x, P), gcn_forward(manual, c.x, P))
    assert not torch.allclose(gcn_forward(masked, c.x, P), gcn_forward(p, c.x, P))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    z1 = gcn_forward(p, c.x, P, dropout=0.5, training=True, generator=g1)
    z2 = gcn_forward(p, c.x, P, dropout=0.5, training=True, generator=g2)
    assert torch.equal(z1, z2) and not torch.allclose(z1, gcn_forward(p, c.x, P))
    mask = dropout_mask((2000, 50), 0.3, torch.Generator().manual_seed(0), "cpu")
    vals = mask.unique()
    assert len(vals) == 2 and vals[0] == 0 and abs(float(vals[1]) - 1 / 0.7) < 1e-6
    assert abs(float((mask > 0).float().mean()) - 0.7) < 0.01
    with pytest.raises(ConfigError, match="dropout"):
        dropout_mask((2, 2), 1.0, None, "cpu")


def test_dropout_masks_of_many_models_are_each_models_own_mask():
    """The batched trainer's in-place fill (threshold and scale once over all rows) gives every
    segment exactly the mask its own generator draws alone; rows outside the segments stay 0."""
    segs = [(0, 7), (9, 4), (13, 11)]  # rows 7-8 belong to no model (padding)
    for p in (0.5, 0.2):
        out = torch.zeros(24, 5)
        dropout_masks_(out, segs, p, [torch.Generator().manual_seed(s) for s in (3, 4, 5)])
        for (o, n), s in zip(segs, (3, 4, 5), strict=True):
            assert torch.equal(out[o:o + n], dropout_mask((n, 5), p, torch.Generator().manual_seed(s), "cpu"))
        assert torch.equal(out[7:9], torch.zeros(2, 5))
    with pytest.raises(ConfigError, match="dropout"):
        dropout_masks_(torch.zeros(2, 2), [(0, 2)], 1.0, [torch.Generator()])


def test_stack_unstack_roundtrip_and_bytes():
    ps = [init_params(10, 3, 4, seed=s) for s in range(3)]
    st = stack_params(ps)
    assert st["conv1.weight"].shape == (3, 4, 10)
    for a, b in zip(ps, unstack_params(st), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert num_params_bytes(ps[0]) == 4 * (4 * 10 + 4 + 3 * 4 + 3)
    with pytest.raises(ConfigError):
        stack_params([ps[0], {"conv1.weight": ps[1]["conv1.weight"]}])
    with pytest.raises(ConfigError):
        stack_params([])


@pytest.mark.parametrize("sparse", [False, True])
def test_batched_forward_equals_single_models(sparse):
    clients = synthetic_clients((30, 45, 25))
    order = [2, 0, 1, 2]
    ps = [init_params(40, 4, 8, seed=s) for s in range(4)]
    ps[1]["conv1.mask"] = torch.rand(8, 40)  # masks apply per model
    for p in ps:
        p.setdefault("conv1.mask", torch.ones(8, 40))
    props = [propagation_matrix(c.edge_index, c.num_nodes) for c in clients]
    g = batch_graphs([clients[k].x for k in order], [props[k] for k in order], nmax=50, sparse=sparse)
    assert g.sparse == sparse and g.nmax == 50 and g.sizes == [25, 30, 45, 25]
    masks = torch.zeros(4, 50, 8)
    for i, k in enumerate(order):
        dropout_mask((clients[k].num_nodes, 8), 0.5, torch.Generator().manual_seed(i), "cpu", out=masks[i, :clients[k].num_nodes])
    z, h = batched_forward(stack_params(ps), g, dropout_masks=masks)
    for i, k in enumerate(order):
        n = clients[k].num_nodes
        ref, rh = gcn_forward(ps[i], clients[k].x, props[k], dropout=0.5, training=True,
                              generator=torch.Generator().manual_seed(i), return_hidden=True)
        assert torch.allclose(z[i, :n], ref, atol=1e-5) and torch.allclose(h[i, :n], rh, atol=1e-5)


def test_dropout_bits_are_the_generators_bit_stream():
    """p = ½ masks read bit j of byte k of the segment's 32-bit words (low byte first) as entry 8k + j;
    checked against numpy's unpacking of the same words, for a size that is and one that is not a multiple of 8."""
    import numpy as np

    from pace_nb.nn.gcn import dropout_bits_

    for n, h in ((37, 64), (5, 3)):
        out = torch.zeros(n + 4, h)
        dropout_bits_(out, [(2, n)], [torch.Generator().manual_seed(11)])
        nbytes = (n * h + 7) // 8
        words = torch.empty((nbytes + 3) // 4, dtype=torch.int64).random_(0, 1 << 32, generator=torch.Generator().manual_seed(11))
        stream = np.frombuffer(words.numpy().astype("<u4").tobytes(), dtype=np.uint8)
        expect = 2.0 * np.unpackbits(stream, bitorder="little")[: n * h].reshape(n, h)
        assert np.array_equal(out[2:2 + n].numpy(), expect)
        assert torch.equal(out[:2], torch.zeros(2, h)) and torch.equal(out[2 + n:], torch.zeros(2, h))
        whole = dropout_bits_(torch.zeros(n, h), [(0, n)], [torch.Generator().manual_seed(11)])  # one buffer of words
        assert np.array_equal(whole.numpy(), expect)


def test_dropout_bits_keep_half_and_each_segment_is_its_own():
    from pace_nb.nn.gcn import dropout_bits_

    big = dropout_bits_(torch.zeros(4000, 64), [(0, 4000)], [torch.Generator().manual_seed(0)])
    assert set(big.unique().tolist()) == {0.0, 2.0} and abs(float((big > 0).float().mean()) - 0.5) < 0.005
    segs, seeds = [(0, 7), (9, 4), (13, 11)], (3, 4, 5)
    out = dropout_bits_(torch.zeros(24, 64), segs, [torch.Generator().manual_seed(s) for s in seeds])
    for (o, n), s in zip(segs, seeds, strict=True):
        alone = dropout_bits_(torch.zeros(n, 64), [(0, n)], [torch.Generator().manual_seed(s)])
        assert torch.equal(out[o:o + n], alone)
    assert torch.equal(out[7:9], torch.zeros(2, 64))
    tiled = [(0, 7), (7, 6), (13, 11)]  # back to back over every row: all words drawn into one buffer
    out = dropout_bits_(torch.zeros(24, 64), tiled, [torch.Generator().manual_seed(s) for s in seeds])
    for (o, n), s in zip(tiled, seeds, strict=True):
        padded = dropout_bits_(torch.zeros(n + 1, 64), [(0, n)], [torch.Generator().manual_seed(s)])  # per segment
        assert torch.equal(out[o:o + n], padded[:n])
    with pytest.raises(ConfigError, match="rows, H"):
        dropout_bits_(torch.zeros(4), [(0, 4)], [None])
