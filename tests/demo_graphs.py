"""Small hand-split demo federations shared by the baseline tests (imported as a plain module:
pytest puts ``tests/`` on ``sys.path``, so plain ``pytest`` and ``python3 -m pytest`` both find it)."""
from __future__ import annotations

import torch

from pace_nb.data.datasets import DemoConfig, make_demo
from pace_nb.data.federation import ClientGraph, FederatedGraph

SEED = 104729


def _split_masks(y: torch.Tensor, g: torch.Generator):
    n = y.numel()
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for c in y.unique():
        idx = (y == c).nonzero().view(-1)
        idx = idx[torch.randperm(idx.numel(), generator=g)]
        a, b = int(0.2 * idx.numel()), int(0.6 * idx.numel())
        masks[0][idx[:a]], masks[1][idx[a:b]], masks[2][idx[b:]] = True, True, True
    return masks


def demo_fg(k: int = 3, n: int = 360) -> FederatedGraph:
    """Small demo graph split into k contiguous node blocks (communities are sorted)."""
    data = make_demo(0, DemoConfig(num_nodes=n, num_classes=3, num_communities=12, vocab=80, words_per_node=8,
                                   topic_words=10))
    g = torch.Generator().manual_seed(0)
    clients = []
    for i, ids in enumerate(torch.arange(n).chunk(k)):
        sub = torch.zeros(n, dtype=torch.long) - 1
        sub[ids] = torch.arange(ids.numel())
        ei = data.edge_index
        keep = (sub[ei[0]] >= 0) & (sub[ei[1]] >= 0)
        tr, va, te = _split_masks(data.y[ids], g)
        clients.append(ClientGraph(i, ids, sub[ei[:, keep]], data.x[ids], data.y[ids], tr, va, te))
    return FederatedGraph("demo", data, clients, 3, {"scheme": "blocks"})
