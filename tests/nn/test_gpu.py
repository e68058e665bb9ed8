"""Everything also runs on CUDA: the batched trainer, PACE, a multi-round baseline and the one-shot
baselines' generator loops (DENSE, OASIS) on ``cuda`` against the CPU rows (run wherever a GPU is present:
``pytest -m gpu``).

Dropout masks come from per-device generators (CUDA's stream differs from the CPU's), so the comparisons
train without dropout; then the two devices differ only by float summation order.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from demo_graphs import SEED, demo_fg
from synthetic import batched_setup as _setup

from pace_nb.methods.baselines import train_federated
from pace_nb.methods.protocol import run_protocol
from pace_nb.nn.training import TrainConfig, train_models

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

NO_DROPOUT = TrainConfig(hidden=16, dropout=0.0, epochs=30)


@pytest.mark.parametrize("ragged", [True, False])
def test_batched_trainer_cuda_matches_cpu(ragged):
    clients, init, seeds, client_of = _setup(num_seeds=2, sizes=(30, 70, 12))
    cpu, _ = train_models(clients, init, seeds, client_of, NO_DROPOUT, device="cpu", progress=False, ragged=ragged)
    gpu, _ = train_models(clients, init, seeds, client_of, NO_DROPOUT, device="cuda", progress=False, ragged=ragged)
    for k in cpu:
        assert gpu[k].device.type == "cpu"  # results come back to the host
        torch.testing.assert_close(gpu[k], cpu[k], rtol=0, atol=1e-4)
    # with dropout the trainer runs on CUDA too and moves the weights
    drop, _ = train_models(clients, init, seeds, client_of, TrainConfig(hidden=16, epochs=5), device="cuda",
                           progress=False, ragged=ragged)
    assert all(bool(torch.isfinite(v).all()) for v in drop.values())
    assert max(float((drop[k] - init[k]).abs().max()) for k in init) > 1e-3


def _scores(frame):
    cols = ["seed", "method", "variant", "rank", "receiver"]
    return frame.sort_values(cols).reset_index(drop=True)


def test_pace_rows_cuda_match_cpu():
    fg = demo_fg()
    kw = dict(seeds=(SEED,), methods=("local", "pace"), train_config=NO_DROPOUT, progress=False)
    cpu = _scores(run_protocol(fg, device="cpu", **kw))
    gpu = _scores(run_protocol(fg, device="cuda", **kw))
    assert len(cpu) == len(gpu) and list(cpu["method"]) == list(gpu["method"])
    # one test node flipping moves a receiver's accuracy by 100 / n_test points; allow two flips
    n = cpu["n_test"].to_numpy()
    assert np.all(np.abs(cpu["acc"].to_numpy() - gpu["acc"].to_numpy()) <= 200.0 / n + 1e-9)


def test_multiround_fedprox_cuda_matches_cpu():
    fg = demo_fg()
    runs = {dev: train_federated(fg, "fedprox", rounds=3, local_epochs=3, seeds=(SEED,), config=NO_DROPOUT,
                                 device=dev, progress=False) for dev in ("cpu", "cuda")}
    for k in runs["cpu"].returned:
        torch.testing.assert_close(runs["cuda"].returned[k], runs["cpu"].returned[k], rtol=0, atol=1e-4)


def test_ghost_fgw_on_cuda_matches_cpu_and_its_gradient_comes_home():
    """GHOST's (and OASIS's) FGW solve runs its products on ``cuda`` (POT's torch backend); the
    value equals the CPU solve and the gradient reaches the CPU generator's features."""
    from pace_nb.methods.oneshot import ghost

    g = torch.Generator().manual_seed(6)
    a = ghost.dense_adjacency(torch.randint(0, 40, (2, 120), generator=g), 40)
    b = ghost.dense_adjacency(ghost.proxy_edges(torch.rand(40, 8, generator=g), 5), 40)
    xr, xp = torch.rand(40, 8, generator=g), torch.rand(40, 8, generator=g).requires_grad_(True)
    on_cpu = ghost.fgw_loss(a, b, xr, xp, 0.5, torch.float64)
    on_gpu = ghost.fgw_loss(a, b, xr, xp, 0.5, torch.float64, device="cuda")
    assert on_gpu.device.type == "cpu"
    assert float(on_gpu) == pytest.approx(float(on_cpu), rel=1e-6)
    on_gpu.backward()
    assert xp.grad is not None and xp.grad.device.type == "cpu" and torch.isfinite(xp.grad).all()


@pytest.mark.parametrize("name", ["dense", "oasis"])
def test_oneshot_generator_loops_run_on_cuda_like_on_cpu(name):
    """DENSE's generator and student loops and OASIS's synthesizer, codebook and distillation run on
    ``cuda``; their noise, labels and dropout are drawn by the same CPU generators on either device, so
    the global model differs from the CPU's only by float rounding carried through a few steps."""
    from pace_nb.methods.oneshot import make_oneshot, run_oneshot

    fg = demo_fg()
    method = make_oneshot(name, **type(make_oneshot(name)).quick_params)
    rows = {dev: run_oneshot(fg, method, seeds=(SEED,), config=TrainConfig(hidden=16, epochs=20), device=dev,
                             progress=False) for dev in ("cpu", "cuda")}
    cpu, gpu = rows["cpu"][0], rows["cuda"][0]
    assert np.isfinite(gpu["acc"]) and gpu["bytes_up"] == cpu["bytes_up"]  # the same upload, built on the GPU
    # a handful of complete-graph test nodes may flip between the two devices' roundings
    assert abs(gpu["acc"] - cpu["acc"]) <= 500.0 / cpu["n_test"] + 1e-9
