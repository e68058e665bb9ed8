"""Per-chunk helpers of the batched trainer (:mod:`pace_nb.nn.training`): a chunk's layout (and the
layouts memo shared by consecutive trainings on one federation), the rows of a mask of every model of a
chunk, and the divergence check after training."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from pace_nb.core.errors import NumericalError
from pace_nb.nn.gcn import Params, batch_graphs
from pace_nb.nn.ragged import RaggedGraphs, ragged_graphs

if TYPE_CHECKING:  # the trainer imports this module
    from pace_nb.data.federation import ClientGraph
    from pace_nb.nn.training import TrainConfig


def chunk_layout(clients, props, client_of, nmax: int | None, sparse: bool, device, layouts: dict):
    """The chunk's batched graphs — ragged (``nmax`` None) or padded to ``nmax`` — and each model's row
    offset; built once into ``layouts`` and reused while the chunk's clients are the same."""
    key = ("layout", tuple(client_of), nmax, sparse, str(device))
    g = layouts.get(key)
    if g is None:
        xs, ps = [clients[k].x for k in client_of], [props[k] for k in client_of]
        g = (ragged_graphs(xs, ps, sparse=sparse, device=device) if nmax is None
             else batch_graphs(xs, ps, nmax, sparse=sparse, device=device))
        for stale in [k for k in layouts if k[0] == "layout"]:  # one layout held at a time
            del layouts[stale]
        layouts[key] = g
    offsets = g.offsets if isinstance(g, RaggedGraphs) else [i * g.nmax for i in range(len(client_of))]
    return g, offsets


#: The layouts memo of the clients trained on last: a cell's Local models and its retraining controls
#: train on the same clients, so their propagation matrices and chunk layouts are built once. One set
#: of clients is held at a time, by reference (their identity is the key; clients are read-only).
_SHARED_LAYOUTS: list[tuple[tuple, dict]] = []


def shared_layouts(clients: Sequence[ClientGraph]) -> dict:
    """The layouts memo :func:`train_models` uses when its caller passes none (see ``_SHARED_LAYOUTS``)."""
    key = tuple(clients)
    if _SHARED_LAYOUTS:
        held, memo = _SHARED_LAYOUTS[0]
        if len(held) == len(key) and all(a is b for a, b in zip(held, key, strict=True)):
            return memo
    _SHARED_LAYOUTS[:] = [(key, {})]
    return _SHARED_LAYOUTS[0][1]


def clear_shared_layouts() -> None:
    """Drop the held layouts (their memory comes back)."""
    _SHARED_LAYOUTS.clear()


def mask_rows(clients, client_of, offsets, mask: str, device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The rows of ``mask`` (``"train_mask"``, ``"val_mask"``) of every model of a chunk: global row
    index, label, weight 1/n (a model's weights sum to 1) and model index."""
    parts: tuple[list[Tensor], ...] = ([], [], [], [])
    for i, k in enumerate(client_of):
        rows = getattr(clients[k], mask).nonzero().view(-1)
        parts[0].append(rows + offsets[i])
        parts[1].append(clients[k].y[rows])
        parts[2].append(torch.full((len(rows),), 1.0 / max(len(rows), 1)))
        parts[3].append(torch.full((len(rows),), i, dtype=torch.long))
    idx, y, w, m = (torch.cat(t).to(device) for t in parts)
    return idx, y, w, m


def check_finite(first_bad: int, params: Params, models, config: TrainConfig) -> None:
    """Raise :class:`NumericalError` when training diverged (a NaN/inf loss or weight)."""
    bad_w = [k for k, v in params.items() if not bool(torch.isfinite(v).all())]
    if first_bad < 0 and not bad_w:
        return
    when = f"the loss became non-finite at epoch {first_bad}" if first_bad >= 0 else \
        f"weights {', '.join(bad_w)} became non-finite"
    raise NumericalError(f"training diverged: {when} (models {models[0]}..{models[-1]}; lr={config.lr}, "
                         f"weight_decay={config.weight_decay}, epochs={config.epochs}); lower the learning rate or "
                         f"check the features for huge values — nothing was stored")
