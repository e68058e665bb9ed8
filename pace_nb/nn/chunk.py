"""Per-chunk helpers of the batched trainer (:mod:`pace_nb.nn.training`): the rows of a mask of every
model of a chunk, and the divergence check after training."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from pace_nb.core.errors import NumericalError
from pace_nb.nn.gcn import Params

if TYPE_CHECKING:  # the trainer imports this module
    from pace_nb.nn.training import TrainConfig


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
