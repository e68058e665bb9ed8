"""Propagated-message second-moment sketches (Eq. 4–5) against dense numpy computations."""
import numpy as np
import pytest
import torch

from pace_nb.core.errors import PaceNBError
from pace_nb.methods.pace.sketch import EPS, SketchConfig, client_sketches, layer_inputs, moment_sketch


def _graph(n=12, f=9, h=5, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(n, n, generator=g) < 0.3).float()
    a = torch.triu(a, 1)
    a = a + a.T + torch.eye(n)
    dinv = a.sum(1).pow(-0.5)
    p = dinv[:, None] * a * dinv[None, :]
    x = torch.rand(n, f, generator=g)
    params = {"conv1.weight": torch.randn(h, f, generator=g), "conv1.bias": torch.randn(h, generator=g),
              "conv2.weight": torch.randn(c, h, generator=g), "conv2.bias": torch.randn(c, generator=g)}
    train = torch.zeros(n, dtype=torch.bool)
    train[: n // 2] = True
    return p, x, params, train


def _np_sketch(s, train):
    m = (s[train] ** 2).mean(0)
    return m / max(m.mean(), EPS) + EPS


def test_moment_sketch_matches_numpy_and_is_normalized():
    s = torch.randn(20, 7, dtype=torch.float64)
    train = torch.arange(20) % 3 == 0
    c = moment_sketch(s, train)
    np.testing.assert_allclose(c.numpy(), _np_sketch(s.numpy(), train.numpy()), rtol=1e-12)
    assert float((c - EPS).mean()) == pytest.approx(1.0)
    # scale invariance of the layerwise normalization (Eq. 5)
    torch.testing.assert_close(moment_sketch(10 * s, train), c)


def test_empty_train_set_gives_eps():
    c = moment_sketch(torch.randn(5, 3), torch.zeros(5, dtype=torch.bool))
    assert torch.all(c == torch.tensor(EPS, dtype=c.dtype))


@pytest.mark.parametrize("sparse", [False, True])
def test_client_sketches_propagated_and_raw(sparse):
    p, x, params, train = _graph()
    pn, xn = p.double().numpy(), x.double().numpy()
    w1, b1 = params["conv1.weight"].double().numpy(), params["conv1.bias"].double().numpy()
    h1 = np.maximum(pn @ xn @ w1.T + b1, 0)
    prop = p.to_sparse() if sparse else p
    got = client_sketches(params, x, prop, train)
    np.testing.assert_allclose(got["conv1.weight"].numpy(), _np_sketch(pn @ xn, train.numpy()), rtol=1e-4)
    np.testing.assert_allclose(got["conv2.weight"].numpy(), _np_sketch(pn @ h1, train.numpy()), rtol=1e-4, atol=1e-9)
    raw = client_sketches(params, x, prop, train, SketchConfig(kind="raw"))
    np.testing.assert_allclose(raw["conv1.weight"].numpy(), _np_sketch(xn, train.numpy()), rtol=1e-4)
    np.testing.assert_allclose(raw["conv2.weight"].numpy(), _np_sketch(h1, train.numpy()), rtol=1e-4, atol=1e-9)


def test_layer_inputs_agree_with_models_forward():
    from pace_nb.nn.gcn import gcn_forward

    p, x, params, _ = _graph(seed=3)
    h_ref = gcn_forward(params, x, p.to_sparse(), return_hidden=True)[1]
    torch.testing.assert_close(layer_inputs(params, x, p)[1], h_ref, atol=1e-5, rtol=1e-5)


def test_bad_sketch_config():
    with pytest.raises(PaceNBError, match="sketch kind"):
        SketchConfig(kind="bogus")
    with pytest.raises(PaceNBError, match="eps"):
        SketchConfig(eps=0)


@pytest.mark.parametrize("kind", ["propagated", "raw"])
def test_client_data_is_measured_once_per_client_and_matches_the_full_sketches(kind):
    """Layer 1's sketch reads the data alone: :func:`client_data` measures it once per client object and
    the sketches built on it are bitwise those measured from scratch; the memo goes with its client."""
    import gc

    from demo_graphs import demo_fg

    from pace_nb.methods.pace import sketch
    from pace_nb.nn.gcn import init_params, propagation_matrix

    cfg = SketchConfig(kind=kind)
    client = demo_fg().clients[0]
    prop, x, first = sketch.client_data(client, cfg)
    again = sketch.client_data(client, cfg)
    assert again[2] is first and again[0] is prop  # measured once
    assert sketch.client_data(client, SketchConfig(kind=kind, eps=1e-9))[2] is not first  # per config
    params = init_params(x.shape[1], 3, 8, seed=1)
    scratch = client_sketches(params, client.x.float(), propagation_matrix(client.edge_index, client.num_nodes),
                              client.train_mask, cfg)
    reused = client_sketches(params, x, prop, client.train_mask, cfg, known=first)
    assert scratch.keys() == reused.keys()
    for name in scratch:
        assert torch.equal(scratch[name], reused[name]), name
    clone = type(client)(**vars(client))  # a client object of its own: measured anew, dropped with it
    sketch.client_data(clone, cfg)
    key = id(clone)
    assert key in sketch._CLIENT_DATA
    del clone
    gc.collect()
    assert key not in sketch._CLIENT_DATA
