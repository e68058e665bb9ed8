"""Federated graphs: client subgraphs, local→global maps, masks (DESIGN §4).

(Skeleton: the dataclasses are the contract; builders are added by the foundation work.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor


@dataclass
class ClientGraph:
    """One client's induced subgraph (cross-client edges dropped).

    Attributes: ``index`` client id; ``global_ids [n]`` sorted global node ids (local→global
    map); ``edge_index [2, e]`` local ids, both directions, no self loops; ``x [n, F]``
    float32 features as PyG loads them; ``y [n]`` labels; ``train_mask/val_mask/test_mask
    [n]`` bool, disjoint.
    """

    index: int
    global_ids: Tensor
    edge_index: Tensor
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.global_ids.numel())


@dataclass
class FederatedGraph:
    """A dataset split among K clients. ``data`` is the complete graph (PyG ``Data``)."""

    dataset: str
    data: Any
    clients: list[ClientGraph]
    num_classes: int
    config: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    @property
    def num_features(self) -> int:
        return int(self.clients[0].x.shape[1])

    def global_mask(self, split: str) -> Tensor:
        """Union of the clients' ``split`` masks ("train", "val", "test") over the global graph."""
        n = int(self.data.num_nodes)
        mask = torch.zeros(n, dtype=torch.bool)
        for c in self.clients:
            mask[c.global_ids[getattr(c, f"{split}_mask")]] = True
        return mask
