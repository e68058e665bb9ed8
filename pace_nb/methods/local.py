"""Local: every client's own GCN, no collaboration (PACE §4, the reference every method is paired with)."""
from __future__ import annotations

from dataclasses import asdict
from collections.abc import Sequence

import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.methods.evaluation import evaluate_method
from pace_nb.methods.contract import Method, register


def seed_positions(local, seeds: Sequence[int] | None) -> list[int]:
    """Positions in ``local.seeds`` of the requested run seeds (all when ``None``)."""
    if seeds is None:
        return list(range(len(local.seeds)))
    missing = [s for s in seeds if int(s) not in local.seeds]
    if missing:
        raise ConfigError(f"seeds {missing} have no trained Local models (trained: {list(local.seeds)})")
    return [local.seeds.index(int(s)) for s in seeds]


@register
class Local(Method):
    """Every client's own GCN, no collaboration: the rows of the matched Local models themselves."""

    name = "local"
    label = "Local"
    paper = "independent Local training (PACE §4)"
    description = "independent Local training, no collaboration"
    colour, marker = "#999999", "s"
    evaluation = "receivers"

    def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
        return run_local(fg, local, seeds=seeds, device=device, local_logits=local_logits)


def run_local(fg, local, *, seeds: Sequence[int] | None = None, device="auto", progress: bool = True,
              local_logits: dict | None = None, train_config=None) -> pd.DataFrame:
    """Rows of the Local models themselves (method "local", variant "native"; ``train_config`` is
    the protocol's, ``local`` carries the one its models were trained with)."""
    from pace_nb.nn.training import client_logits

    rows: list[dict] = []
    for s in seed_positions(local, seeds):
        z_l = (local_logits or {}).get(s) or [client_logits(local.model(s, i), c, device=device)
                                              for i, c in enumerate(fg.clients)]
        rows.extend(evaluate_method(fg, z_l, seed=local.seeds[s], method="local", variant="native", rank=0,
                                    params={"train": asdict(local.config)}))
    return pd.DataFrame(rows)
