"""Fidelity-pass methods against small hand computations (DESIGN §12): FedPub's OpenFGL model,
embedding and similarity diagonal; FedRCL's released loss; FedNova's momentum a_k; FedAux's
[h ‖ z] head."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pace_nb.methods.baselines import make_method, train_federated
from pace_nb.methods.baselines.fedpub import functional_embedding, prune_masks, similarity_weights
from pace_nb.nn.gcn import batch_graphs, batched_forward, gcn_forward, propagation_matrix, stack_params
from pace_nb.nn.training import TrainConfig
from tests.test_baselines import SEED, demo_fg


@pytest.fixture(scope="module")
def fg():
    return demo_fg()


def _tiny(seed=0, F=5, H=4, C=3, head=True):
    g = torch.Generator().manual_seed(seed)
    p = {"conv1.weight": torch.randn(H, F, generator=g), "conv1.bias": torch.randn(H, generator=g),
         "conv2.weight": torch.randn(H if head else C, H, generator=g), "conv2.bias": torch.randn(H if head else C, generator=g)}
    if head:
        p["lin.weight"], p["lin.bias"] = torch.randn(C, H, generator=g), torch.randn(C, generator=g)
    for k in [k for k in p if k.endswith("weight")]:
        p[k.replace("weight", "mask")] = torch.rand(p[k].shape, generator=g)
    return p


def _graph(n=6):
    ei = torch.tensor([[0, 1, 1, 2, 3, 4, 4, 5], [1, 0, 2, 1, 4, 3, 5, 4]])
    P = propagation_matrix(ei, n)
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(9))
    return x, P, P.to_dense().numpy()


def test_fedpub_three_layer_forward_and_embedding_by_hand():
    p, (x, P, Pd) = _tiny(), _graph()
    n = {k: v.numpy().astype(np.float64) for k, v in p.items()}
    xn = x.numpy().astype(np.float64)
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    h1 = relu(Pd @ xn @ (n["conv1.weight"] * n["conv1.mask"]).T + n["conv1.bias"])
    h2 = Pd @ h1 @ (n["conv2.weight"] * n["conv2.mask"]).T + n["conv2.bias"]
    z = relu(h2) @ (n["lin.weight"] * n["lin.mask"]).T + n["lin.bias"]
    np.testing.assert_allclose(gcn_forward(p, x, P).numpy(), z, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(functional_embedding(p, x, P).numpy(), h2.mean(0), rtol=1e-4, atol=1e-5)  # 64-dim conv2 output
    two = _tiny(head=False)
    t = {k: v.numpy().astype(np.float64) for k, v in two.items()}
    g1 = relu(Pd @ xn @ (t["conv1.weight"] * t["conv1.mask"]).T + t["conv1.bias"])
    np.testing.assert_allclose(functional_embedding(two, x, P).numpy(), g1.mean(0), rtol=1e-4, atol=1e-5)  # hidden, not logits
    # the batched trainer's forward agrees with the single-model forward (3-layer model)
    q = _tiny(seed=1)
    g = batch_graphs([x, x], [P, P], sparse=False)
    zb, _ = batched_forward(stack_params([p, q]), g)
    torch.testing.assert_close(zb[0], gcn_forward(p, x, P), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(zb[1], gcn_forward(q, x, P), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layers", [3, 2])
def test_fedpub_run_records_similarity_diagonal(fg, layers):
    run = train_federated(fg, make_method("fedpub", layers=layers), 1, 5, (SEED,), config=TrainConfig(epochs=5),
                          device="cpu", progress=False)
    m = make_method("fedpub", layers=layers)
    from pace_nb.methods.baselines.fedpub import proxy_graph

    x, P = proxy_graph(fg.num_features, SEED)
    pruned = prune_masks(run.trained, 1e-3)
    emb = torch.stack([functional_embedding({k: v[b] for k, v in pruned.items()}, x, P) for b in range(3)])
    assert emb.shape == (3, 64)
    w = similarity_weights(emb, 10.0)
    np.testing.assert_allclose(run.params["similarity_diag"][0], torch.diagonal(w).numpy(), rtol=1e-4)
    json.dumps(run.params)  # recorded with every row
    assert ("lin.weight" in run.returned) == (layers == 3) and m.cfg.layers == layers
    # the receiver keeps its own (pruned) masks; shared weights are S-mixed
    for key in [k for k in run.returned if k.endswith(".mask")]:
        torch.testing.assert_close(run.returned[key], prune_masks(run.trained, 1e-3)[key])
    wf = w.float()
    torch.testing.assert_close(run.returned["conv1.bias"], wf @ run.trained["conv1.bias"], rtol=1e-4, atol=1e-6)
