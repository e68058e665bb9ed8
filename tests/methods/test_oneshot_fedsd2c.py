"""FedSD2C (pace_nb.methods.oneshot.fedsd2c): the released code's mechanisms on the demo graph —
Fourier initialisation, core-set of classes above ipc, per-instance matching of decoded latent
codes of the client's own feature autoencoder, uploads as bytes, KD of each distillate against
its own uploader's distiller."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pace_nb.core.errors import ConfigError
from pace_nb.methods.oneshot import base, fedsd2c, make_oneshot, run_oneshot
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix
from pace_nb.nn.training import TrainConfig, train_local

SEED = 3


@pytest.fixture(scope="module")
def fg():
    from pace_nb.data.federation import build_federated

    return build_federated("demo", scheme="dirichlet", num_clients=10, seed=2024, beta=0.05)


@pytest.fixture(scope="module")
def ctx(fg, one_thread):
    local = train_local(fg, (SEED,), progress=False)
    return base.OneShotContext(fg, SEED, TrainConfig(), torch.device("cpu"), [local.model(0, k) for k in range(10)])


def counts(client, c):
    return torch.bincount(client.y[client.train_mask].long(), minlength=c)


def test_fourier_mix_against_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 16)), rng.random((3, 16))
    fa, fb = np.fft.fft(a, axis=-1), np.fft.fft(b, axis=-1)
    want = np.real(np.fft.ifft((0.2 * np.abs(fa) + 0.8 * np.abs(fb)) * np.exp(1j * np.angle(fa)), axis=-1))
    got = fedsd2c.fourier_mix(torch.tensor(a), torch.tensor(b), 0.8).numpy()
    assert np.allclose(got, want, atol=1e-10)
    x = torch.tensor(a, dtype=torch.float32)
    assert torch.allclose(fedsd2c.fourier_mix(x, torch.tensor(b, dtype=torch.float32), 0.0), x, atol=1e-6)


def test_select_coreset_by_hand():
    y = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
    ce = torch.tensor([0.5, 0.1, 0.9, 0.3, 0.2, 0.4, 0.1, 0.2, 0.3])
    pred = torch.tensor([0, 0, 1, 0, 1, 1, 2, 2, 0])  # node 2 (class 0) and node 8 (class 2) are wrong
    blocks = fedsd2c.select_coreset(ce, y, torch.arange(9), 2, 500, pred, torch.Generator().manual_seed(0))
    # class 1 has 2 ≤ ipc samples: not taken; class 0: lowest CE {1, 3}; rest {0, 2}: node 2 is
    # mispredicted, so the partner is node 0 (cycled); class 2: core {6, 7}, rest {8} all wrong → 8
    assert len(blocks) == 2
    (c0, p0), (c2, p2) = blocks
    assert sorted(c0.tolist()) == [1, 3] and p0.tolist() == [0, 0]
    assert sorted(c2.tolist()) == [6, 7] and p2.tolist() == [8, 8]


def test_distillates_in_range_at_the_rows_scale_and_matched(fg, ctx):
    k = 8  # 80 training nodes of one class
    client = fg.clients[k]
    full = make_oneshot("fedsd2c", steps=30).client_message(ctx, k, client)
    core = make_oneshot("fedsd2c", mode="coreset").client_message(ctx, k, client)
    xs, xc = full["x"], core["x"]
    assert xs.shape == xc.shape == (10, fg.num_features) and torch.equal(full["y"], core["y"])
    assert float(xs.min()) >= float(client.x.min()) and float(xs.max()) <= float(client.x.max())
    # decoded onto the client's rows' scale: each distillate's mass is that of a real row, not a dense one
    ratio = xs.sum(1) / xc.sum(1).mean()
    assert float(ratio.min()) > 0.5 and float(ratio.max()) < 2.0
    # the matching lowered the per-instance feature loss from the Fourier start
    theta = {n: ctx.local[k][n] for n in WEIGHT_KEYS}
    eye = propagation_matrix(torch.empty(2, 0, dtype=torch.long), len(xs))
    rows = [int(torch.nonzero((client.x == r).all(1)).flatten()[0]) for r in xc]
    target = gcn_forward(theta, client.x, propagation_matrix(client.edge_index, client.num_nodes),
                         return_hidden=True)[1][rows]
    start = make_oneshot("fedsd2c", steps=0).client_message(ctx, k, client)["x"]
    loss = lambda x: F.mse_loss(gcn_forward(theta, x, eye, return_hidden=True)[1], target).item()
    assert loss(xs) < 0.5 * loss(start)


def test_feature_autoencoder_fits_the_clients_rows_and_decodes_into_their_space(fg):
    x = fg.clients[8].x.float()
    untrained = fedsd2c.train_autoencoder(x, hidden=64, latent=16, epochs=0, lr=5e-3, seed=0)
    ae = fedsd2c.train_autoencoder(x, hidden=64, latent=16, epochs=150, lr=5e-3, seed=0)
    assert ae.binary and ae.loss(x).item() < 0.5 * untrained.loss(x).item()
    with torch.no_grad():
        out = ae.decode(torch.randn(20, 16, generator=torch.Generator().manual_seed(0)) * 10)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0  # binary: a sigmoid decoder
    xc = torch.linspace(-1.0, 2.0, 40).reshape(8, 5)  # continuous rows: decoded inside their range
    cont = fedsd2c.train_autoencoder(xc, hidden=8, latent=2, epochs=5, lr=5e-3, seed=0)
    with torch.no_grad():
        out = cont.decode(torch.randn(50, 2, generator=torch.Generator().manual_seed(1)) * 100)
    assert not cont.binary and float(out.min()) >= -1.0 and float(out.max()) <= 2.0


def test_distillates_are_decodings_of_optimised_latent_codes(fg, ctx, monkeypatch):
    """The synthesis optimises a code of the client's autoencoder (the graph stand-in for the
    released image VAE), and the upload is that code's decoding — never a raw-feature update."""
    seen = {}
    real = fedsd2c.synthesize_distillates

    def spy(theta, decode, z0, *args, **kwargs):
        out = real(theta, decode, z0, *args, **kwargs)
        seen.update(decode=decode, z0=z0, out=out)
        return out

    monkeypatch.setattr(fedsd2c, "synthesize_distillates", spy)
    k = 8
    msg = make_oneshot("fedsd2c", steps=10).client_message(ctx, k, fg.clients[k])
    z, xs = seen["out"]
    ae = seen["decode"].__self__
    assert isinstance(ae, fedsd2c.FeatureAutoencoder) and z.shape == (10, ae.encoder[-1].out_features)
    assert torch.equal(msg["x"], xs) and torch.allclose(ae.decode(z), xs)
    assert not torch.equal(z, seen["z0"])  # the codes moved
    # the autoencoder was fitted to this client's own rows
    assert ae.loss(fg.clients[k].x.float()).item() < 0.5 * fedsd2c.FeatureAutoencoder(
        fg.num_features, 128, 64, True, 0.0, 1.0, 0).loss(fg.clients[k].x.float()).item()


def test_only_classes_above_ipc_are_uploaded(fg, ctx):
    method = make_oneshot("fedsd2c", steps=2, ae_epochs=10)
    for k, client in enumerate(fg.clients):
        if not bool(client.train_mask.any()):
            continue
        msg = method.client_message(ctx, k, client)
        n = counts(client, fg.num_classes)
        want = torch.repeat_interleave(torch.arange(fg.num_classes), torch.where(n > 10, 10, 0))
        assert torch.equal(msg["y"].long().sort()[0], want), k
        assert ("model.conv1.weight" in msg) == bool((n > 10).any())


def test_coreset_mode_uploads_real_rows_only(fg, ctx):
    k = 9
    client = fg.clients[k]
    core = make_oneshot("fedsd2c", mode="coreset").client_message(ctx, k, client)
    train = client.x[client.train_mask]
    ytr = client.y[client.train_mask]
    for r, label in zip(core["x"], core["y"].long(), strict=True):  # every uploaded row is a real training node of its class
        hit = (train == r).all(1)
        assert bool(hit.any()) and bool((ytr[hit] == label).any())
    full = make_oneshot("fedsd2c", steps=5, ae_epochs=10).client_message(ctx, k, client)
    assert not any(bool((train == r).all(1).any()) for r in full["x"])


def test_upload_is_the_serialized_distillates_and_distiller(fg, ctx):
    row = run_oneshot(fg, make_oneshot("fedsd2c", steps=3, ae_epochs=10), (SEED,), local=_local(fg), progress=False)[0]
    method = make_oneshot("fedsd2c", steps=3, ae_epochs=10)
    want = [len(base.encode(method.client_message(ctx, k, c))) if bool(c.train_mask.any()) else 0
            for k, c in enumerate(fg.clients)]
    assert json.loads(row["params"])["bytes_per_client"] == want
    model_bytes = 4 * sum(ctx.local[8][n].numel() for n in WEIGHT_KEYS)
    assert want[8] > model_bytes + 4 * 10 * fg.num_features


def test_server_loss_is_kd_against_the_uploaders_model(fg, ctx, monkeypatch):
    method = make_oneshot("fedsd2c", steps=2, ae_epochs=10)
    msgs = [base.decode(base.encode(method.client_message(ctx, k, fg.clients[k]))) for k in (8, 4)]
    graph = method.synthesize(ctx, msgs)
    seen = {}
    monkeypatch.setattr(base.OneShotContext, "fit", lambda self, g, loss_fn=None, **kw: seen.update(fn=loss_fn, g=g)
                        or self.init_model())
    method.server_train(ctx, msgs, graph)
    z = torch.randn(graph.x.shape[0], fg.num_classes, generator=torch.Generator().manual_seed(1))
    eye = propagation_matrix(torch.empty(2, 0, dtype=torch.long), 10)
    teach = torch.cat([gcn_forward({n: m[f"model.{n}"] for n in WEIGHT_KEYS}, m["x"], eye) for m in msgs])
    p = F.softmax(teach, 1)
    want = (p * (p.log() - F.log_softmax(z, 1))).sum(1).mean()
    assert seen["fn"](z, None).item() == pytest.approx(want.item(), rel=1e-5)
    # client 4's own distiller, not client 8's, labels client 4's distillates
    other = gcn_forward({n: msgs[0][f"model.{n}"] for n in WEIGHT_KEYS}, msgs[1]["x"], eye)
    assert not torch.allclose(other, teach[10:])


def test_deterministic_and_bad_mode(fg, ctx):
    a = run_oneshot(fg, make_oneshot("fedsd2c", steps=5, ae_epochs=10), (SEED,), local=_local(fg), progress=False)[0]
    b = run_oneshot(fg, make_oneshot("fedsd2c", steps=5, ae_epochs=10), (SEED,), local=_local(fg), progress=False)[0]
    assert a["acc"] == b["acc"] and a["bytes_up"] == b["bytes_up"]
    with pytest.raises(ConfigError, match="mode"):
        make_oneshot("fedsd2c", mode="distillates")


def _local(fg):
    return train_local(fg, (SEED,), progress=False)


def test_coreset_rows_are_their_own_variant_in_the_comparison_table(fg, one_thread):
    """The core-set-only rows are variant "coreset": the comparison table shows them as a row of
    their own beside the full FedSD2C, never averaged into it."""
    import pandas as pd

    from pace_nb.analysis import spear_comparison as sc
    from pace_nb.analysis.paper_values import paper_values
    from pace_nb.methods.oneshot.compare import run_comparison

    rows = pd.concat([run_comparison(fg, ["fedsd2c"], run_seed=SEED, method_params={"fedsd2c": p})
                      for p in ({"ae_epochs": 10}, {"mode": "coreset"})], ignore_index=True)
    assert list(rows.variant) == ["native", "coreset"]
    assert rows.acc.iloc[0] != rows.acc.iloc[1]
    table = sc.entries("main", paper_values("spear", table="main"), rows)
    got = table[(table.dataset == "demo") & (table.method == "fedsd2c")]
    assert sorted(got.variant) == ["coreset", "native"]
    scored = dict(zip(got.variant, [s[0] for s in sc.scores(got, rows)], strict=True))
    assert scored == {"native": rows.acc.iloc[0], "coreset": rows.acc.iloc[1]}
    assert {sc.label(e) for _, e in got.iterrows()} == {"FedSD2C", "FedSD2C [core-set only]"}
