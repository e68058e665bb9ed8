"""The one-shot protocol runner (docs/DESIGN.md §2, §5, §6): build the federation, train Local once, run every method.

A *method* (registered in :data:`pace_nb.methods.registry.METHODS`) is a function

    fn(fg: FederatedGraph, local: LocalModels | None, *, seeds: Sequence[int], device,
       progress: bool, local_logits: dict[int, list[Tensor]], train_config, **hyperparameters) -> pandas.DataFrame

returning result rows (schema of docs/ARCHITECTURE.md, built with
:func:`pace_nb.methods.evaluation.make_row` / :func:`pace_nb.methods.evaluation.evaluate_method`) for every
seed in ``seeds``: pooled rows (``receiver = -1``) and per-receiver rows. The rows are checked
(:func:`~pace_nb.methods.evaluation.check_method_rows`): none, a missing column or a value out of
range is a :class:`~pace_nb.core.errors.MethodError`, as is the exception of a plugin method. ``local`` holds the
Local models trained ONCE per :func:`run_protocol` call with the shared ``train_config``
(``None`` when no registered method needs them); ``local_logits[s]`` caches the eval-mode
Local logits (one ``[n_i, C]`` tensor per client) of seed position ``s`` in ``local.seeds``.
Baselines return their native rows (``variant="native"``) and, where meaningful, "+CNLL" rows
(``variant="cnll"``, :func:`evaluate_method` with ``alpha="cnll"`` against the Local logits).
Every hyperparameter is checked before any work (:func:`~pace_nb.methods.registry.check_method_params`):
an unknown name or a bad value is a ``ConfigError`` naming the valid ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Sequence

import pandas as pd

from pace_nb.core.config import PAPER_SEEDS, DATA_SEED
from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import COLUMNS
from pace_nb.core.validation import check_names, check_seeds
from pace_nb.methods.evaluation import check_method_rows
from pace_nb.methods.registry import METHODS, check_all_method_params, check_method_params, plugin_errors, runner

MethodFn = Callable[..., pd.DataFrame]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method, resolved: ``fn`` has the protocol signature; ``needs`` lists shared
    inputs ("local": the trained Local models)."""

    name: str
    fn: MethodFn
    needs: tuple[str, ...] = ("local",)
    description: str = ""
    defaults: dict = field(default_factory=dict)
    #: ``check(fg, train_config, params)``: the method's checks against the federation (before training)
    check: Callable[..., None] = lambda fg, train_config, params: None


def available_methods() -> list[str]:
    """Names of every registered method."""
    return sorted(METHODS.names())


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; :class:`UnknownNameError` listing the valid ones."""
    entry = METHODS.get(name)
    meta = entry.meta
    return MethodSpec(entry.name, runner(entry), tuple(meta.get("needs", ("local",))), meta.get("description", ""),
                      dict(meta.get("defaults", {})),
                      lambda fg, train_config, params: entry.obj(**params).check_federation(fg, train_config))


def local_logits(fg, local, device="auto") -> dict[int, list]:
    """Eval-mode Local logits ``{seed position: [z_L per client]}`` of trained ``local`` models."""
    from pace_nb.nn.training import batched_logits

    k = fg.num_clients
    flat = batched_logits(local.params, fg.clients, [i for _ in local.seeds for i in range(k)], device=device)
    return {s: flat[s * k:(s + 1) * k] for s in range(len(local.seeds))}


def record_setting(params, fg, train_config) -> list[str]:
    """Every row's ``params`` JSON plus ``"data"`` (the federation: data seed, scheme and its
    δ/resolution/β/ratios, as in ``fg.config``) and ``"train"`` (the Local training config),
    so that rows of different experiments never share an identity."""
    import json
    from dataclasses import asdict

    data = {k: v for k, v in (getattr(fg, "config", None) or {}).items() if k != "dataset"}
    out = []
    for p in params:
        try:
            obj = json.loads(p) if isinstance(p, str) and p else {}
        except ValueError:
            obj = {}
        obj = obj if isinstance(obj, dict) else {"value": obj}
        obj.setdefault("data", data)
        obj.setdefault("train", asdict(train_config))
        out.append(json.dumps(obj, sort_keys=True, default=str))
    return out


def federation(dataset: str, *, partition: str = "louvain", num_clients: int = 10, data_seed: int = DATA_SEED,
               beta: float | None = None, data_root=None):
    """The :class:`~pace_nb.data.federation.FederatedGraph` :func:`run_protocol` builds for a dataset name."""
    from pace_nb.data.federation import build_federated

    kw: dict[str, Any] = {"beta": beta} if beta is not None else {}
    return build_federated(dataset, scheme=partition, num_clients=num_clients, seed=data_seed, data_root=data_root, **kw)


def needs_local(methods: Sequence[str]) -> bool:
    """Whether any of ``methods`` uses the trained Local models."""
    return any("local" in get_method(m).needs for m in check_names(methods, "methods"))


def _declared_evaluation(name: str, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` of method ``name``, checked to be scored where its class says (``Method.evaluation``):
    a summary groups and labels rows by it."""
    declared = METHODS.get(name).obj.evaluation
    said = sorted(set(rows["evaluation"])) if "evaluation" in rows.columns else []
    if said and said != [declared]:
        raise ConfigError(f"method {name!r} declares evaluation {declared!r}, but its rows say {', '.join(map(repr, said))}")
    return rows


def run_protocol(
    dataset,
    *,
    partition: str = "louvain",
    num_clients: int = 10,
    seeds: Sequence[int] = PAPER_SEEDS,
    methods: Sequence[str] = ("local", "pace"),
    method_params: dict[str, dict] | None = None,
    data_seed: int = DATA_SEED,
    data_root=None,
    device="auto",
    progress: bool = True,
    train_config=None,
    beta: float | None = None,
    local=None,
) -> pd.DataFrame:
    """Run the one-shot protocol(s) on a dataset name or a ready ``FederatedGraph``.

    Builds the federation (``partition``, ``num_clients``, ``data_seed``, ``beta`` for
    Dirichlet), trains the Local models once for all ``seeds`` — or reuses ``local``
    (:class:`~pace_nb.nn.training.LocalModels` trained on the same federation for these seeds) —
    and hands them to every method. ``method_params[name]`` goes to method ``name`` (e.g.
    ``{"pace": {"variants": ("full", "transport"), "ranks": (2, 6)}}``).
    Returns the result rows (DataFrame; percent scores).
    """
    from pace_nb.nn.training import TrainConfig, train_local

    seeds = check_seeds(seeds)
    specs = [get_method(m) for m in check_names(methods, "methods")]
    check_names([s.name for s in specs], "methods (after aliases)")
    params = check_all_method_params(method_params)  # every name and value, before any work
    for spec in specs:
        params[spec.name] = check_method_params(spec.name, {**spec.defaults, **params.get(spec.name, {})})
    fg = federation(dataset, partition=partition, num_clients=num_clients, data_seed=data_seed, beta=beta,
                    data_root=data_root) if isinstance(dataset, str) else dataset
    train_config = train_config or (local.config if local is not None else TrainConfig())
    for spec in specs:  # e.g. an impossible PACE rank: one line before anything is trained
        spec.check(fg, train_config, params[spec.name])
    if local is None and any("local" in s.needs for s in specs):  # before anything is allocated
        from pace_nb.core.config import resolve_device
        from pace_nb.core.limits import check_training_memory

        check_training_memory(len(seeds) * fg.num_clients, fg.num_features, train_config.hidden, fg.num_classes,
                              resolve_device(device))
    logits = None
    if local is not None:
        if tuple(local.seeds) != seeds:
            raise ConfigError(f"the given Local models were trained for seeds {list(local.seeds)}, not {list(seeds)}")
        if local.config != train_config:
            raise ConfigError("the given Local models were trained with another train_config")
        logits = local_logits(fg, local, device)
    elif any("local" in s.needs for s in specs):
        local = train_local(fg, seeds, train_config, device=device, progress=progress)
        logits = local_logits(fg, local, device)
    frames = []
    for spec in specs:  # a plugin's exception or bad rows: one MethodError line, nothing returned
        with plugin_errors(spec.name):
            out = spec.fn(fg, local, seeds=seeds, device=device, progress=progress, local_logits=logits,
                          train_config=train_config, **params[spec.name])
        frames.append(_declared_evaluation(spec.name, check_method_rows(out, spec.name, fg)))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    rows["params"] = record_setting(rows["params"], fg, train_config)
    return rows[list(COLUMNS) + [c for c in rows.columns if c not in COLUMNS]]
