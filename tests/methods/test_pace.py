"""The PACE protocol end to end on a small synthetic federation (no data files)."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from pace_nb.methods.pace import lowrank
from pace_nb.core.errors import PaceNBError, UnknownNameError
from pace_nb.methods.evaluation import COLUMNS, evaluate_method, make_row
from pace_nb.data.federation import ClientGraph, FederatedGraph
from pace_nb.methods.pace.protocol import PaceConfig, VARIANTS, receive, run_pace, server, transport_seed, upload, variant_config
from pace_nb.nn.training import TrainConfig, client_logits, train_local

SEEDS = (11, 12)
CFG = TrainConfig(epochs=30)


def _client(i, n, f, c, g, empty=None):
    y = torch.randint(0, c, (n,), generator=g)
    x = (torch.rand(n, f, generator=g) < 0.1).float()
    x[torch.arange(n), y] = 1.0  # class-correlated features
    src = torch.randint(0, n, (3 * n,), generator=g)
    dst = torch.where(torch.rand(3 * n, generator=g) < 0.8, src.roll(1), torch.randint(0, n, (3 * n,), generator=g))
    keep = src != dst
    ei = torch.unique(torch.cat([torch.stack([src[keep], dst[keep]]), torch.stack([dst[keep], src[keep]])], 1), dim=1)
    perm = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][perm[: n // 5]] = True
    masks[1][perm[n // 5: 3 * n // 5]] = True
    masks[2][perm[3 * n // 5:]] = True
    if empty == "val":
        masks[1][:] = False
    if empty == "test":
        masks[2][:] = False
    return ClientGraph(i, torch.arange(n) + 1000 * i, ei, x, y, *masks)


def make_fg(k=3, n=60, f=16, c=4, seed=0, empty=None):
    g = torch.Generator().manual_seed(seed)
    clients = [_client(i, n, f, c, g, empty if i == k - 1 else None) for i in range(k)]
    data = type("D", (), {"num_nodes": 1000 * k})()
    return FederatedGraph("synthetic", data, clients, c, {"scheme": "manual"})


@pytest.fixture(scope="module")
def fg_local():
    fg = make_fg()
    return fg, train_local(fg, SEEDS, CFG, device="cpu", progress=False)


def test_upload_server_receive_roundtrip(fg_local):
    fg, local = fg_local
    cfg = PaceConfig(rank=2)
    w = [local.model(0, i) for i in range(3)]
    ups = [upload(w[i], local.init[0], c, cfg) for i, c in enumerate(fg.clients)]
    msg = lowrank.deserialize(ups[0])
    assert msg["delta/conv1.weight"].rank == 2 and msg["delta/conv1.bias"].kind == "dense"
    assert set(n for n in msg if n.startswith("sketch/")) == {"sketch/conv1.weight", "sketch/conv2.weight"}
    downs = server(ups, cfg)
    assert all(lowrank.deserialize(d)["conv1.weight"].rank == 2 for d in downs)
    ext = receive(w[0], local.init[0], downs[0], cfg)
    gam = lowrank.reconstruct(lowrank.deserialize(downs[0]))
    for n in w[0]:
        torch.testing.assert_close(ext[n], w[0][n] + gam[n])
    tr = transport_seed(fg, w, local.init[0], cfg)
    assert tr.bytes_up == [len(u) for u in ups] and tr.bytes_down == [len(d) for d in downs]


def test_single_client_correction_is_zero():
    fg = make_fg(k=1)
    local = train_local(fg, (5,), CFG, device="cpu", progress=False)
    w = local.model(0, 0)
    tr = transport_seed(fg, [w], local.init[0], PaceConfig(rank=3))
    for n in w:
        torch.testing.assert_close(tr.external[0][n], w[n], atol=1e-6, rtol=0)


def test_run_pace_variants_rows_and_alpha_semantics(fg_local):
    fg, local = fg_local
    rows = run_pace(fg, local, variants=tuple(VARIANTS), ranks=(2, 0), device="cpu", progress=False)
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == len(SEEDS) * len(VARIANTS) * 2 * (fg.num_clients + 1)
    rec = rows[rows.receiver >= 0]
    assert (rows[rows.variant == "transport"].alpha == 1.0).all()
    assert (rec[rec.variant == "fixed0.5"].alpha == 0.5).all()
    assert rec[rec.variant == "full"].alpha.between(0, 1).all()
    # dense control: rank 0 costs more than the dense model (sketches + framing)
    dense = rows[(rows["rank"] == 0) & (rows.variant == "full")]
    assert (dense.upload_ratio > 100).all() and (dense.return_ratio >= 100).all()
    low = rows[(rows["rank"] == 2) & (rows.variant == "full")]
    assert (low.upload_ratio < dense.upload_ratio.min()).all()
    # transport at α = 1 predicts with External: acc == acc_external
    tr = rec[rec.variant == "transport"]
    np.testing.assert_allclose(tr.acc, tr.acc_external)
    params = json.loads(rows.params.iloc[0])
    assert params["pace"]["rank"] in (2, 0) and params["train"]["epochs"] == 30


def test_alpha_zero_receivers_equal_local_exactly(fg_local):
    fg, local = fg_local
    z_l = [client_logits(local.model(0, i), c) for i, c in enumerate(fg.clients)]
    tr = transport_seed(fg, [local.model(0, i) for i in range(3)], local.init[0], PaceConfig())
    z_e = [client_logits(p, c) for p, c in zip(tr.external, fg.clients, strict=True)]
    rows = evaluate_method(fg, z_l, z_e, [0.0, 0.0, 0.0], seed=SEEDS[0], method="pace", variant="full")
    local_rows = evaluate_method(fg, z_l, seed=SEEDS[0], method="local")
    for a, b in zip(rows, local_rows, strict=True):
        assert a["acc"] == b["acc"] and a["f1_macro"] == b["f1_macro"] and a["acc"] == a["acc_local"]
    # CNLL picks α = 0 when External equals Local → Local bit for bit
    rows = evaluate_method(fg, z_l, [z.clone() for z in z_l], "cnll", seed=SEEDS[0], method="pace")
    assert all(r["alpha"] == 0.0 and r["acc"] == r["acc_local"] for r in rows)


def test_receiver_without_val_or_test_nodes():
    for empty in ("val", "test"):
        fg = make_fg(empty=empty)
        local = train_local(fg, (3,), CFG, device="cpu", progress=False)
        rows = run_pace(fg, local, device="cpu", progress=False)
        last = rows[rows.receiver == fg.num_clients - 1].iloc[0]
        if empty == "val":
            assert last.alpha == 0.0 and last.acc == last.acc_local
        else:
            assert np.isnan(last.acc) and last.n_test == 0
        pooled = rows[rows.receiver == -1].iloc[0]
        assert 0 <= pooled.acc <= 100


def test_pooled_row_concatenates_receivers(fg_local):
    fg, local = fg_local
    z = [client_logits(local.model(1, i), c) for i, c in enumerate(fg.clients)]
    rows = pd.DataFrame(evaluate_method(fg, z, seed=1, method="local", bytes_up=[10, 20, 30], dense_bytes=100))
    pooled, rec = rows[rows.receiver == -1].iloc[0], rows[rows.receiver >= 0]
    assert pooled.n_test == rec.n_test.sum()
    assert pooled.acc == pytest.approx((rec.acc * rec.n_test).sum() / rec.n_test.sum())
    assert pooled.bytes_up == 60 and pooled.upload_ratio == pytest.approx(20.0)


def test_configs_and_rows_validate():
    assert variant_config("mean", 4) == PaceConfig(rank=4, consensus="mean")
    with pytest.raises(UnknownNameError, match="variant"):
        variant_config("bogus")
    for bad in (dict(rank=-1), dict(rank=2.5), dict(alpha=2.0), dict(alpha="best"), dict(consensus="x")):
        with pytest.raises(PaceNBError):
            PaceConfig(**bad)
    row = make_row(dataset="d", acc=50.0)
    assert list(row) == list(COLUMNS) and np.isnan(row["alpha"]) and row["params"] == "{}"
    with pytest.raises(PaceNBError, match="unknown result column"):
        make_row(accuracy=1)
