"""Method registry and the one-shot protocol runner (DESIGN §2, §5, §6).

A *method* is a function

    fn(fg: FederatedGraph, local: LocalModels | None, *, seeds: Sequence[int], device,
       progress: bool, local_logits: dict[int, list[Tensor]], **params) -> pandas.DataFrame

returning result rows (schema of docs/ARCHITECTURE.md, built with
:func:`pace_nb.evaluation.make_row` / :func:`pace_nb.evaluation.evaluate_method`) for every
seed in ``seeds``: pooled rows (``receiver = -1``) and per-receiver rows. ``local`` holds the
Local models trained ONCE per :func:`run_protocol` call with the shared ``train_config``
(``None`` when no registered method needs them); ``local_logits[s]`` caches the eval-mode
Local logits (one ``[n_i, C]`` tensor per client) of seed position ``s`` in ``local.seeds``.
Baselines return their native rows (``variant="native"``) and, where meaningful, "+CNLL" rows
(``variant="cnll"``, :func:`evaluate_method` with ``alpha="cnll"`` against the Local logits).
Methods accept and ignore unknown ``**params``. Register with :func:`register_method`;
``pace_nb.baselines`` is imported lazily on the first lookup so that it can register itself.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .config import PAPER_SEEDS, DATA_SEED
from .errors import ConfigError, unknown
from .evaluation import COLUMNS

MethodFn = Callable[..., pd.DataFrame]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method; ``needs`` lists shared inputs ("local": the trained Local models)."""

    name: str
    fn: MethodFn
    needs: tuple[str, ...] = ("local",)
    description: str = ""
    defaults: dict = field(default_factory=dict)


_REGISTRY: dict[str, MethodSpec] = {}
_PLUGINS_LOADED = False


def register_method(name: str, fn: MethodFn, *, needs: Sequence[str] = ("local",), description: str = "",
                    defaults: dict | None = None) -> MethodSpec:
    """Register (or replace) method ``name`` (lower-case); see the module docstring for ``fn``."""
    bad = set(needs) - {"local"}
    if bad:
        raise ConfigError(f"unknown method needs {sorted(bad)}; valid: local")
    spec = MethodSpec(name.lower(), fn, tuple(needs), description, dict(defaults or {}))
    _REGISTRY[spec.name] = spec
    return spec


def _load_plugins() -> None:
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    try:
        importlib.import_module("pace_nb.baselines")
    except ModuleNotFoundError as exc:  # baselines not written yet
        if exc.name not in ("pace_nb.baselines",):
            raise


def available_methods() -> list[str]:
    """Names of every registered method (after loading the baselines package)."""
    _load_plugins()
    return sorted(_REGISTRY)


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; :class:`UnknownNameError` listing the valid ones."""
    _load_plugins()
    key = str(name).lower()
    if key not in _REGISTRY:
        raise unknown("method", name, _REGISTRY)
    return _REGISTRY[key]


def _register_builtin() -> None:
    from .pace import run_local, run_pace

    register_method("local", run_local, description="independent Local training, no collaboration")
    register_method("pace", run_pace, description="PACE: rank-r RegMean correction + CNLL (variants, ranks)")


_register_builtin()


def _local_logits(fg, local, device) -> dict[int, list]:
    from .training import batched_logits

    k = fg.num_clients
    flat = batched_logits(local.params, fg.clients, [i for _ in local.seeds for i in range(k)], device=device)
    return {s: flat[s * k:(s + 1) * k] for s in range(len(local.seeds))}


def run_protocol(
    dataset,
    *,
    partition: str = "louvain",
    num_clients: int = 10,
    seeds: Sequence[int] = PAPER_SEEDS,
    methods: Sequence[str] = ("local", "pace"),
    pace_variants: Sequence[str] = ("full",),
    ranks: Sequence[int] = (6,),
    data_seed: int = DATA_SEED,
    data_root=None,
    device="auto",
    progress: bool = True,
    train_config=None,
    beta: float | None = None,
    method_params: dict[str, dict] | None = None,
) -> pd.DataFrame:
    """Run the one-shot protocol(s) on a dataset name or a ready ``FederatedGraph``.

    Builds the federation (``partition``, ``num_clients``, ``data_seed``, ``beta`` for
    Dirichlet), trains the Local models once for all ``seeds`` and hands them to every method.
    ``pace_variants``/``ranks`` go to "pace"; ``method_params[name]`` to method ``name``.
    Returns the result rows (DataFrame; percent scores).
    """
    from .training import TrainConfig, train_local

    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ConfigError("run_protocol needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"duplicate seeds in {list(seeds)}")
    specs = [get_method(m) for m in methods]
    if not specs:
        raise ConfigError("run_protocol needs at least one method")
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise ConfigError(f"ranks must be integers >= 1 (0 = dense), got {r!r}")
    if isinstance(dataset, str):
        from .federation import build_federated

        kw = {"beta": beta} if beta is not None else {}
        fg = build_federated(dataset, scheme=partition, num_clients=num_clients, seed=data_seed,
                             data_root=data_root, **kw)
    else:
        fg = dataset
    train_config = train_config or TrainConfig()
    local = logits = None
    if any("local" in s.needs for s in specs):
        local = train_local(fg, seeds, train_config, device=device, progress=progress)
        logits = _local_logits(fg, local, device)
    params = dict(method_params or {})
    params.setdefault("pace", {}).update({"variants": tuple(pace_variants), "ranks": tuple(int(r) for r in ranks)})
    frames = []
    for spec in specs:
        kw = {**spec.defaults, **params.get(spec.name, {})}
        out = spec.fn(fg, local, seeds=seeds, device=device, progress=progress, local_logits=logits,
                      train_config=train_config, **kw)
        frames.append(pd.DataFrame(out))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    missing = [c for c in COLUMNS if c not in rows.columns]
    if missing:
        raise ConfigError(f"method rows lack column(s) {missing}; build them with evaluation.make_row")
    return rows[list(COLUMNS) + [c for c in rows.columns if c not in COLUMNS]]


SUMMARY_COLUMNS = ("method", "variant", "rank", "acc_mean", "acc_std", "f1w_mean", "f1w_std", "f1m_mean",
                   "alpha_mean", "alpha_zero_frac", "upload_ratio", "return_ratio", "n_seeds")


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, partition, K, method, variant, rank): mean and sample std over
    seeds of the pooled scores (percent); ``alpha_mean`` / ``alpha_zero_frac`` over
    receiver × seed units; communication ratios (percent of dense bytes) averaged."""
    keys = ["dataset", "partition", "num_clients", "method", "variant", "rank"]
    rows = pd.DataFrame(rows)
    if rows.empty:
        return pd.DataFrame(columns=keys[:3] + list(SUMMARY_COLUMNS))
    rows = rows.copy()
    rows["partition"] = rows["partition"].fillna("").astype(str)
    for col in ("acc", "f1_weighted", "f1_macro", "alpha", "upload_ratio", "return_ratio"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    pooled = rows[rows["receiver"] == -1].groupby(keys, sort=False)
    out = pd.DataFrame({
        "acc_mean": pooled["acc"].mean(), "acc_std": pooled["acc"].std(ddof=1),
        "f1w_mean": pooled["f1_weighted"].mean(), "f1w_std": pooled["f1_weighted"].std(ddof=1),
        "f1m_mean": pooled["f1_macro"].mean(),
    })
    recv = rows[(rows["receiver"] >= 0) & rows["alpha"].notna()].groupby(keys, sort=False)["alpha"]
    out = out.join(pd.DataFrame({"alpha_mean": recv.mean(), "alpha_zero_frac": recv.apply(lambda a: float((a == 0).mean()))}))
    out["upload_ratio"] = pooled["upload_ratio"].mean()
    out["return_ratio"] = pooled["return_ratio"].mean()
    out["n_seeds"] = pooled["seed"].nunique()
    return out.reset_index()[keys + list(SUMMARY_COLUMNS[3:])]
