"""Checks of a user's graph: what a usable node-classification ``Data`` holds, and how one
given through the Python API is made like the loaded datasets (:func:`prepare_graph`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and PyG are imported where graphs are checked: `pace-nb datasets` needs neither
    from torch_geometric.data import Data

from pace_nb.core.errors import ConfigError


def validate_graph(data, where: str = "graph", num_classes: int | None = None) -> None:
    """A usable node-classification graph: finite 2-D features, an integer ``[2, E]`` edge list
    with ids in ``[0, N)``, integer labels in ``[0, C)`` one per node. Else :class:`ConfigError`."""
    import torch

    x, ei, y = getattr(data, "x", None), getattr(data, "edge_index", None), getattr(data, "y", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] == 0:
        raise ConfigError(f"{where}: x must be a 2-D feature tensor [N, F] with N >= 1")
    if not x.is_floating_point() and x.dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                                                      torch.bool):
        raise ConfigError(f"{where}: x has dtype {x.dtype}; features must be numbers")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ConfigError(f"{where}: x holds {bad} NaN/inf value(s); features must be finite")
    n = int(x.shape[0])
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.shape[0] != 2:
        raise ConfigError(f"{where}: edge_index must be an integer tensor of shape [2, E]")
    if ei.is_floating_point() or ei.dtype == torch.bool or ei.is_complex():
        raise ConfigError(f"{where}: edge_index has dtype {ei.dtype}; node ids must be integers")
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise ConfigError(f"{where}: edge_index holds node ids in [{int(ei.min())}, {int(ei.max())}], "
                          f"outside [0, {n - 1}] (N = {n})")
    if not isinstance(y, torch.Tensor) or y.numel() != n:
        raise ConfigError(f"{where}: y must hold one label per node ({n}), got "
                          f"{None if not isinstance(y, torch.Tensor) else tuple(y.shape)}")
    if y.is_floating_point() or y.dtype == torch.bool or y.is_complex():
        raise ConfigError(f"{where}: y has dtype {y.dtype}; labels must be integers 0..C-1")
    lo, hi = int(y.min()), int(y.max())
    c = num_classes if num_classes is not None else hi + 1
    if lo < 0 or hi >= c:
        raise ConfigError(f"{where}: labels must lie in [0, {c - 1}] (num_classes = {c}), got [{lo}, {hi}]")


#: Optional per-node attributes kept by :func:`prepare_graph` (a given partition and split).
PER_NODE = ("client", "split", "train_mask", "val_mask", "test_mask")

#: Largest feature magnitude accepted: a float32 GCN on larger values overflows to inf.
MAX_FEATURE = 1e15


def prepare_graph(data, where: str = "custom Data", num_classes: int | None = None) -> Data:
    """A user's ``Data`` made like the loaded datasets: dense float32 ``x`` (a sparse ``x`` is
    densified), labels ``[N]`` (a ``[N, 1]`` column is flattened), duplicate edges coalesced into
    one (a repeated edge is not a weight), after :func:`validate_graph`; features above
    :data:`MAX_FEATURE` in magnitude are a :class:`ConfigError`. Keeps ``name`` and sets ``num_classes``."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce

    x = getattr(data, "x", None)
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        x = x.to_dense()
    y = getattr(data, "y", None)
    if isinstance(y, torch.Tensor) and y.dim() == 2 and y.shape[1] == 1:
        y = y.view(-1)
    view = Data(x=x, edge_index=getattr(data, "edge_index", None), y=y)
    validate_graph(view, where, num_classes)
    assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)  # validate_graph checked both
    if x.is_floating_point() and x.numel() and float(x.abs().max()) > MAX_FEATURE:
        raise ConfigError(f"{where}: features reach {float(x.abs().max()):.3g} in magnitude (above {MAX_FEATURE:g}, "
                          f"where float32 training overflows); scale or standardize them")
    out = Data(x=x.float().contiguous(), edge_index=coalesce(view.edge_index.long(), num_nodes=int(x.shape[0])),
               y=y.long().view(-1))
    for key in PER_NODE:  # a user's own clients / split travel with the graph (docs/OWN_DATA.md)
        value = getattr(data, key, None)
        if isinstance(value, torch.Tensor):
            out[key] = value
    out.name = str(getattr(data, "name", None) or "custom")
    out.num_classes = int(num_classes if num_classes is not None else int(out.y.max()) + 1)
    return out


def graph_facts(data) -> dict[str, int]:
    """Counts a probe of a graph reports (``benchmarks/citeseer_probe.py``): ``nodes``, ``edges``
    (undirected: stored directed pairs / 2), ``isolated`` (degree 0), ``zero_feature_rows`` (all
    features 0, e.g. the 15 CiteSeer test indices PyG fills with zeros) and ``self_loops``."""
    import torch

    n, ei = int(data.num_nodes), data.edge_index
    deg = torch.bincount(ei[0], minlength=n) if ei.numel() else torch.zeros(n, dtype=torch.long)
    return {"nodes": n, "edges": int(ei.shape[1]) // 2, "isolated": int((deg == 0).sum()),
            "zero_feature_rows": int(((data.x != 0).sum(1) == 0).sum()), "self_loops": int((ei[0] == ei[1]).sum())}


def lonely_nodes(fg):
    """Boolean mask over the global graph: nodes with no neighbour inside their own client (isolated
    globally, or cut off by the partition) — a node whose GCN sees only its own features."""
    import torch

    out = torch.zeros(int(fg.data.num_nodes), dtype=torch.bool)
    for c in fg.clients:
        ei = c.edge_index[:, c.edge_index[0] != c.edge_index[1]] if c.edge_index.numel() else c.edge_index
        deg = torch.bincount(ei[0], minlength=c.num_nodes) if ei.numel() else torch.zeros(c.num_nodes, dtype=torch.long)
        out[c.global_ids[deg == 0]] = True
    return out
