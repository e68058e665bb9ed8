"""RegMean consensus (Eq. 6–7) and receiver-anchored correction (Eq. 8–9)."""
import numpy as np
import pytest
import torch

from pace_nb.methods.pace import lowrank
from pace_nb.core.errors import PaceNBError
from pace_nb.methods.pace.transport import (TransportConfig, consensus, corrections, external_params, regmean,
                               server_returns)


def _deltas(k=4, seed=0, f=20, h=8, c=3):
    g = torch.Generator().manual_seed(seed)
    d = {"conv1.weight": torch.randn(k, h, f, generator=g), "conv1.bias": torch.randn(k, h, generator=g),
         "conv2.weight": torch.randn(k, c, h, generator=g), "conv2.bias": torch.randn(k, c, generator=g)}
    sk = {"conv1.weight": torch.rand(k, f, generator=g) * 3, "conv2.weight": torch.rand(k, h, generator=g)}
    return d, sk


def test_regmean_equals_dense_closed_form():
    d, sk = _deltas(k=5)
    got = regmean(d["conv1.weight"].double(), sk["conv1.weight"].double()).numpy()
    dn, cn = d["conv1.weight"].double().numpy(), sk["conv1.weight"].double().numpy()
    num = sum(dn[j] @ np.diag(cn[j]) for j in range(5))
    den = sum(np.diag(cn[j]) for j in range(5))
    np.testing.assert_allclose(got, num @ np.linalg.inv(den), rtol=1e-10)
    # the weights are self-normalizing: scaling all sketches changes nothing; w_j = 1/K cancels
    np.testing.assert_allclose(regmean(d["conv1.weight"].double(), 7 * sk["conv1.weight"].double()).numpy(),
                               got, rtol=1e-10)


def test_regmean_clamps_zero_denominators():
    d = torch.randn(3, 2, 4, dtype=torch.float64)
    sk = torch.zeros(3, 4, dtype=torch.float64)
    out = regmean(d, sk, eps=1e-12)
    assert torch.all(torch.isfinite(out)) and torch.all(out == 0)


def test_consensus_vectors_mean_and_mean_variant():
    d, sk = _deltas()
    cons = consensus(d, sk)
    torch.testing.assert_close(cons["conv1.bias"], d["conv1.bias"].mean(0))
    torch.testing.assert_close(cons["conv2.weight"], regmean(d["conv2.weight"], sk["conv2.weight"]))
    plain = consensus(d, None, TransportConfig(consensus="mean"))
    for n in d:
        torch.testing.assert_close(plain[n], d[n].mean(0))
    with pytest.raises(PaceNBError, match="sketch"):
        consensus(d, None)


def test_single_client_gets_zero_correction():
    d, sk = _deltas(k=1)
    gam = corrections(consensus(d, sk), d)
    for n in gam:
        torch.testing.assert_close(gam[n], torch.zeros_like(gam[n]), atol=1e-6, rtol=0)


def test_returns_are_truncated_corrections():
    d, sk = _deltas(k=3)
    ret = server_returns(d, sk, rank=2)
    assert ret["conv1.weight"].kind == "lowrank" and ret["conv1.weight"].rank == 2
    assert ret["conv2.weight"].kind == "lowrank"  # min(3, 8) = 3 > 2
    assert ret["conv1.bias"].kind == "dense"
    gam = corrections(consensus(d, sk), d)
    for i in range(3):
        one = lowrank.reconstruct(lowrank.unbatch(ret, i))
        g = gam["conv1.weight"][i].double().numpy()
        s = np.linalg.svd(g, compute_uv=False)
        err = np.linalg.norm(g - one["conv1.weight"].double().numpy())
        assert err == pytest.approx(np.sqrt((s[2:] ** 2).sum()), rel=1e-4)
        torch.testing.assert_close(one["conv1.bias"], gam["conv1.bias"][i])
    # dense return: exactly the correction; receivers then sit on the consensus: W_L + Γ = W0 + Δ^C when Δ̄ = Δ
    dense = lowrank.reconstruct(server_returns(d, sk, rank=0))
    for n in d:
        torch.testing.assert_close(dense[n], gam[n])


def test_direct_return_is_shared_compressed_consensus():
    d, sk = _deltas(k=3)
    ret = lowrank.reconstruct(server_returns(d, sk, rank=0, config=TransportConfig(ret="direct")))
    cons = consensus(d, sk)
    for n in d:
        for i in range(3):
            torch.testing.assert_close(ret[n][i], cons[n])
    init = {n: torch.randn(v.shape[1:]) for n, v in d.items()}
    local = {n: init[n] + d[n] for n in d}
    ext = external_params(local, init, ret, "direct")
    for n in d:
        torch.testing.assert_close(ext[n], (init[n] + cons[n]).expand_as(ext[n]))
    ext_c = external_params(local, init, lowrank.reconstruct(server_returns(d, sk, rank=0)))
    for n in d:  # dense correction: W_L + Γ = W0 + Δ^C for every receiver
        torch.testing.assert_close(ext_c[n], (init[n] + cons[n]).expand_as(ext_c[n]), atol=1e-5, rtol=1e-5)


def test_bad_transport_config():
    with pytest.raises(PaceNBError, match="consensus"):
        TransportConfig(consensus="median")
    with pytest.raises(PaceNBError, match="return mode"):
        TransportConfig(ret="both")
    with pytest.raises(PaceNBError, match="RegMean"):
        regmean(torch.randn(2, 3, 4), torch.rand(2, 3))
