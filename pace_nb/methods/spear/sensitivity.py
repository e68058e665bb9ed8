"""SPEAR Fig. 4(b): γ, T and a swept on several graphs (homophilous Cora against heterophilous
Texas and Actor, SPEAR §5.3 "Hyperparameter Stability") over data seeds.

Each dataset keeps SPEAR's Dirichlet β and its K where the partitioner can (every client ≥ 5
nodes); a graph too small for K clients at that β (Texas: 183 nodes) gets the largest K that works
for every seed, recorded in the rows' ``num_clients``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.methods.spear import analysis as sa
from pace_nb.methods.spear import core as sp

#: SPEAR's data seeds (docs/DESIGN.md §7): its multi-seed summaries vary the federation.
DATA_SEEDS = (2024, 2025, 2026)
#: The graphs of Fig. 4(b)'s a trade-off (§5.3).
SWEEP_DATASETS = ("Cora", "Texas", "Actor")


def federations(dataset: str, seeds: Sequence[int] = DATA_SEEDS, beta: float = 0.05, num_clients: int = 10,
                data_root=None, builder: Callable | None = None) -> list:
    """One Dirichlet federation per data seed, all with the largest K ≤ ``num_clients`` that every seed
    can partition at ``beta``; ConfigError when not even K = 2 works."""
    builder = builder or (lambda **kw: sa.federation(data_root=data_root, **kw))
    last: ConfigError | None = None
    for k in range(int(num_clients), 1, -1):
        try:
            return [builder(dataset=dataset, beta=beta, num_clients=k, seed=int(s)) for s in seeds]
        except ConfigError as exc:
            last = exc
    raise ConfigError(f"{dataset}: no Dirichlet partition with beta={beta} for 2..{num_clients} clients ({last})")


def sweep_seeds(dataset: str, params: Sequence[str] = ("gamma", "T", "a"), grid: Mapping[str, Sequence] | None = None,
                seeds: Sequence[int] = DATA_SEEDS, beta: float = 0.05, num_clients: int = 10,
                config: sp.SpearConfig | None = None, data_root=None, builder: Callable | None = None) -> pd.DataFrame:
    """:func:`analysis.sweep_hyperparameter` of each of ``params`` (values: ``grid[p]``, else the paper's)
    on one federation per data seed; rows carry ``dataset``, ``seed`` and ``num_clients``."""
    grid = grid or {}
    fgs = federations(dataset, seeds, beta, num_clients, data_root, builder)
    return pd.concat([sa.sweep_hyperparameter(fg, p, grid.get(p), config) for fg in fgs for p in params],
                     ignore_index=True)


def summary(rows: pd.DataFrame, param: str, value: float) -> pd.DataFrame:
    """Mean ± sample std (ddof 1) of ``acc`` over seeds at ``param = value``, one row per dataset."""
    f = rows[(rows["swept"] == param) & (pd.to_numeric(rows[param]) == value)]
    out = f.groupby("dataset", sort=False).agg(K=("num_clients", "first"), mean=("acc", "mean"),
                                              std=("acc", "std"), seeds=("seed", "nunique"))
    return out.reset_index()


def paper_setting(beta: float = 0.05, config: sp.SpearConfig | None = None) -> dict[str, float]:
    """The value of each swept parameter in SPEAR's main results (β, and γ, T, a of ``SpearConfig``)."""
    config = config or sp.SpearConfig()
    return {"beta": float(beta), "gamma": float(config.gamma), "T": float(config.T), "a": float(config.a)}
