"""Rank-r carriers: Eckart–Young optimality, eligibility, wire format, byte accounting."""
import numpy as np
import pytest
import torch

from pace_nb.methods.pace import lowrank
from pace_nb.core.errors import ConfigError, DataCorruptionError, PaceNBError


def _gcn_like(f=50, h=16, c=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"conv1.weight": torch.randn(h, f, generator=g), "conv1.bias": torch.randn(h, generator=g),
            "conv2.weight": torch.randn(c, h, generator=g), "conv2.bias": torch.randn(c, generator=g)}


@pytest.mark.parametrize("shape,rank", [((64, 143), 6), ((7, 64), 6), ((30, 20), 1), ((12, 40), 11)])
def test_truncated_svd_is_best_rank_r(shape, rank):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    left, right = lowrank.truncated_svd(a, rank)
    assert left.shape == (shape[0], rank) and right.shape == (shape[1], rank)
    approx = (left @ right.T).double().numpy()
    s = np.linalg.svd(a.double().numpy(), compute_uv=False)
    err = np.linalg.norm(a.double().numpy() - approx)
    assert err == pytest.approx(np.sqrt((s[rank:] ** 2).sum()), rel=1e-5)
    # independent reconstruction from numpy's SVD
    u, sv, vt = np.linalg.svd(a.double().numpy(), full_matrices=False)
    np.testing.assert_allclose(approx, (u[:, :rank] * sv[:rank]) @ vt[:rank], atol=1e-5)
    assert np.linalg.matrix_rank(approx, tol=1e-4) == rank


@pytest.mark.parametrize("shape", [(64, 500), (15, 64), (80, 20)])
def test_truncated_svd_matches_lapack_svd_and_batches_bit_for_bit(shape):
    """The Gram-matrix factors span numpy's (LAPACK) top-r singular subspace: the same product to
    float32 precision, the same singular values, an orthonormal ``right``; a batch is each matrix's."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(4, *shape, generator=g) @ torch.diag(torch.linspace(3, 0.1, shape[1]))
    left, right = lowrank.truncated_svd(a, 6)
    u, sv, vt = np.linalg.svd(a.double().numpy(), full_matrices=False)
    ref = np.einsum("bmr,br,brn->bmn", u[..., :6], sv[..., :6], vt[..., :6, :])
    np.testing.assert_allclose((left @ right.mT).double().numpy(), ref, atol=2e-6 * np.abs(ref).max())
    np.testing.assert_allclose(torch.linalg.vector_norm(left.double(), dim=-2).numpy(), sv[..., :6], rtol=1e-5)
    eye = np.broadcast_to(np.eye(6), (4, 6, 6))
    np.testing.assert_allclose((right.mT @ right).double().numpy(), eye, atol=1e-5)
    for i in range(4):
        one = lowrank.truncated_svd(a[i], 6)
        assert torch.equal(one[0], left[i]) and torch.equal(one[1], right[i])


def test_truncated_svd_of_rank_deficient_and_zero_matrices_is_finite():
    """Fewer than r non-zero singular values: the product is still the matrix, the spare right
    columns stay within the wire bound (|V| <= 1); a zero Δ (a client that did not train) gives zeros."""
    g = torch.Generator().manual_seed(4)
    a = torch.randn(64, 2, generator=g) @ torch.randn(2, 300, generator=g)
    left, right = lowrank.truncated_svd(a, 6)
    assert torch.isfinite(left).all() and torch.isfinite(right).all() and float(right.abs().max()) <= 1.0
    np.testing.assert_allclose((left @ right.T).numpy(), a.numpy(), atol=1e-5 * float(a.abs().max()))
    left, right = lowrank.truncated_svd(torch.zeros(64, 100), 6)
    assert not left.any() and not right.any()


def test_eligibility_and_dense_fallback():
    p = {"a": torch.randn(64, 100), "b": torch.randn(7, 64), "c": torch.randn(6, 64), "v": torch.randn(64)}
    car = lowrank.compress(p, 6)
    assert [car[n].kind for n in "abcv"] == ["lowrank", "lowrank", "dense", "dense"]
    assert car["a"].rank == 6 and car["c"].rank == 0
    assert torch.equal(car["c"].reconstruct(), p["c"]) and torch.equal(car["v"].reconstruct(), p["v"])
    assert all(c.kind == "dense" for c in lowrank.compress(p, lowrank.DENSE).values())


@pytest.mark.parametrize("bad", [None, "dense", -3, 1.5, "6", True])
def test_bad_rank_is_config_error(bad):
    with pytest.raises(ConfigError, match="rank"):
        lowrank.compress(_gcn_like(), bad)
    assert issubclass(ConfigError, PaceNBError)


def test_huge_rank_sends_everything_dense_and_costs_more_than_dense():
    p = _gcn_like()
    car = lowrank.compress(p, 10_000)
    assert all(c.kind == "dense" for c in car.values())
    blob = lowrank.serialize(car)
    assert len(blob) / lowrank.dense_model_bytes(p) >= 1.0


def test_serialize_roundtrip_bit_exact_and_byte_count():
    p = _gcn_like()
    car = lowrank.compress(p, 3)
    car.update(lowrank.dense_carriers({"sketch/conv1.weight": torch.rand(50)}))
    blob = lowrank.serialize(car)
    back = lowrank.deserialize(blob)
    assert list(back) == list(car)
    for name, c in car.items():
        assert back[name].kind == c.kind and back[name].shape == c.shape
        for t0, t1 in zip(c.tensors(), back[name].tensors(), strict=True):
            assert t1.dtype == torch.float32 and torch.equal(t0, t1)
    # payload: (16 + 50)·3 + 16 + (7 + 16)·3 + 7 + 50 sketch floats, 4 bytes each
    floats = (16 + 50) * 3 + 16 + (7 + 16) * 3 + 7 + 50
    assert lowrank.payload_bytes(car) == 4 * floats
    assert len(blob) == 4 * floats + lowrank.framing_bytes(car)
    assert 0 < lowrank.framing_bytes(car) < 400


def test_corrupt_messages_are_detected():
    blob = lowrank.serialize(lowrank.compress(_gcn_like(), 2))
    with pytest.raises(DataCorruptionError):
        lowrank.deserialize(b"XXXX" + blob[4:])
    with pytest.raises(DataCorruptionError):
        lowrank.deserialize(blob[:-4])
    with pytest.raises(DataCorruptionError):
        lowrank.deserialize(blob + b"\0\0\0\0")


def test_batched_carriers_match_per_model_and_must_be_unbatched_for_the_wire():
    batch = {n: torch.stack([_gcn_like(seed=s)[n] for s in range(3)]) for n in _gcn_like()}
    car = lowrank.compress(batch, 4, batch_dims=1)
    for i in range(3):
        one = lowrank.compress({n: v[i] for n, v in batch.items()}, 4)
        rec_b = lowrank.reconstruct(lowrank.unbatch(car, i))
        for n in one:
            torch.testing.assert_close(rec_b[n], one[n].reconstruct(), atol=1e-5, rtol=1e-5)
    with pytest.raises(ConfigError, match="unbatch"):
        lowrank.serialize(car)


def test_cora_shaped_rank6_ratios_match_paper_accounting():
    # Cora: F = 1433, H = 64, C = 7; upload = carriers + two sketches, return = carriers only
    p = _gcn_like(f=1433, h=64, c=7)
    dense = lowrank.dense_model_bytes(p)
    assert dense == 4 * (64 * 1433 + 64 + 7 * 64 + 7)
    ret = lowrank.compress(p, 6)
    up = dict(ret, **lowrank.dense_carriers({"s1": torch.rand(1433), "s2": torch.rand(64)}))
    up_ratio = 100 * len(lowrank.serialize(up)) / dense
    ret_ratio = 100 * len(lowrank.serialize(ret)) / dense
    assert abs(up_ratio - 12.1) < 1.5 and abs(ret_ratio - 10.3) < 1.5


def test_check_ranks_is_the_one_rank_check():
    assert lowrank.check_ranks([2, 0, 64], shapes=[(64, 600), (6, 64)]) == (2, 0, 64)
    for bad in ([None], ["dense"], [True], [-1], [2**31], [2, 2], []):
        with pytest.raises(ConfigError):
            lowrank.check_ranks(bad)
    with pytest.raises(ConfigError, match=r"rank 65 is impossible: .* rank at most 64"):
        lowrank.check_ranks([6, 65], "PACE ranks", shapes=[(64, 600), (6, 64)])
    assert lowrank.attainable_rank([(64, 600), (6, 64)]) == 64 and lowrank.attainable_rank([(3,)]) == 0


def test_impossible_rank_is_refused_by_every_entry_before_training(monkeypatch):
    from pace_nb.data.federation import build_federated
    from pace_nb.methods.protocol import run_protocol
    import pace_nb.nn.training as training

    fg = build_federated("demo", num_clients=3)
    monkeypatch.setattr(training, "train_local", lambda *a, **k: pytest.fail("trained before the rank check"))
    with pytest.raises(ConfigError, match="rank 65 is impossible"):
        run_protocol(fg, seeds=(1,), methods=("local", "pace"), method_params={"pace": {"ranks": (6, 65)}})
    with pytest.raises(ConfigError, match="rank 100000 is impossible"):
        run_protocol(fg, seeds=(1,), methods=("pace",), method_params={"pace": {"ranks": 100000}})
