"""The sections of a grid config, declared: ``[grid]``, ``[[experiment]]`` and ``[[spear]]``.

Each section is a typed, :func:`~pace_nb.core.validation.declared` dataclass whose fields carry
their checks (:func:`~pace_nb.core.validation.param`), read by
:func:`~pace_nb.core.reading.read_config`: an unknown key names the valid ones, every value is
checked for its type and range as it is read (never a lenient reading: ``strict = "no"`` is not
true, ``beta = true`` is not 1), ``validate()`` checks what spans keys. :func:`read_sections`
reads a config's sections and resolves their names against the registries (datasets and graph
files, methods); every error is one :class:`~pace_nb.core.errors.ConfigError` naming the file,
the line, the section and the key. ``cfg`` is a :class:`~pace_nb.experiments.grid.GridConfig`.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Mapping

from pace_nb.core.config import DATA_SEED, PAPER_SEEDS
from pace_nb.core.errors import PaceNBError
from pace_nb.core.limits import MAX_CLIENTS, MAX_ROUNDS
from pace_nb.core.reading import FieldError, Many, Table, TableFor, as_list, read_config
from pace_nb.core.validation import (MAX_SEED, OMITTED, Flag, Interval, ListOf, Options, Text, check_names,
                                     check_seeds, config_keys, declared, like, param)
from pace_nb.methods.pace.lowrank import check_ranks
from pace_nb.methods.pace.protocol import VARIANTS as PACE_VARIANTS
from pace_nb.methods.registry import check_all_method_params, registered, shared_options
from pace_nb.methods.spear.core import VARIANTS as SPEAR_VARIANTS, SpearConfig
from pace_nb.nn.training import TrainConfig

PARTITIONS = ("louvain", "metis", "dirichlet", "given")  # given: a graph file's own client column
SECTIONS = ("grid", "experiment", "spear")

SEEDS = Many(then=check_seeds)  # distinct integers in [0, 2**32 - 1], at most MAX_SEEDS
CLIENTS = Many((Interval(int, 2, MAX_CLIENTS),))
BETAS = Many((Interval(float, 0, None, closed="neither"),), convert=float)
NAMES = Many((Text(),))
TEXT = (Text(), OMITTED)
BATCH = (Interval(int, 1, None), OMITTED)
ROUNDS = (Interval(int, 1, MAX_ROUNDS), OMITTED)
SHARE = (Interval(float, 0, 1), OMITTED)
METHOD_PARAMS = Table((Table(),), each="a table of that method's parameters")  # { fedprox = { mu = 0.1 } }


def batches(seeds: tuple[int, ...], size: int | None) -> list[tuple[int, ...]]:
    """``seeds`` in consecutive batches of ``size`` (all at once when ``None``)."""
    size = size or len(seeds)
    return [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]


def _check_method_params(method_params: Mapping | None, own: Mapping[str, tuple[str, ...]]) -> None:
    """Known methods, parameter names and values (the method registry's checks); ``own[method]``
    (``"*"``: every method) are set by the section's own keys and may not be repeated per method."""
    try:
        checked = check_all_method_params(method_params)
    except PaceNBError as exc:
        raise FieldError(f"method_params: {exc}", "method_params") from None
    for method, params in checked.items():
        clash = sorted(set(params) & set(own.get(method, ()) + own.get("*", ())))
        if clash:
            raise FieldError(f"method_params.{method}: {', '.join(clash)} is set for the whole section, "
                             f"not per method", "method_params", clash[0])


@declared
@dataclass(frozen=True)
class GridSection:
    """``[grid]``: the run seeds and data draws every ``[[experiment]]`` inherits, and how the
    grid runs (``pace-nb grid`` options override ``device``, ``strict``, ``data_root``)."""

    name: str | None = param(None, *TEXT)
    description: str | None = param(None, *TEXT)
    seeds: tuple[int, ...] = param(PAPER_SEEDS, SEEDS)
    data_seed: tuple[int, ...] = param((DATA_SEED,), SEEDS, help="partition and mask draws")
    seed_batch: int | None = param(None, *BATCH, help="number of seeds trained as one batch")
    device: str | None = param(None, *TEXT)
    strict: bool = param(False, Flag())
    data_root: str | None = param(None, *TEXT)


@declared
@dataclass(frozen=True)
class ExperimentSection:
    """``[[experiment]]``: the protocol (Local, PACE, the baselines) over datasets × partitions
    [× β] × K × data draws, run seeds in batches, one cell per method group."""

    datasets: tuple[str, ...] = param(MISSING, NAMES, help="dataset names or graph files")
    methods: tuple[str, ...] = param(MISSING, Many((Text(),), then=check_names))
    name: str | None = param(None, *TEXT)
    partitions: tuple[str, ...] = param(("louvain",), Many((Options(PARTITIONS),)))
    beta: tuple[float, ...] = param((0.5,), BETAS)
    clients: tuple[int, ...] = param((10,), CLIENTS)
    seeds: tuple[int, ...] = param(PAPER_SEEDS, SEEDS)
    data_seed: tuple[int, ...] = param((DATA_SEED,), SEEDS)
    seed_batch: int | None = param(None, *BATCH)
    methods_if_available: tuple[str, ...] = param((), Many((Text(),), empty=True))
    method_groups: Any = param((), ListOf((Text(), ListOf((Text(),)))), help="cells' method lists (default: one)")
    pace_variants: tuple[str, ...] = param(("full",), Many((Options(tuple(PACE_VARIANTS)),)))
    ranks: tuple[int, ...] = param((6,), Many(then=check_ranks))
    train: dict = param(MISSING, TableFor(TrainConfig), default_factory=dict)
    method_params: dict = param(MISSING, METHOD_PARAMS, default_factory=dict)

    def validate(self) -> None:
        if any(not as_list(g) for g in self.method_groups):
            raise FieldError("method_groups: every group needs at least one method", "method_groups")
        # a method's shared options (PACE's variants, ranks) come from pace_variants / ranks
        _check_method_params(self.method_params, {e.name: shared_options(e.name) for e in registered().entries()})

    def n_cells(self) -> int:
        parts = sum(len(self.beta) if p == "dirichlet" else 1 for p in self.partitions)
        return (len(self.datasets) * parts * len(self.clients) * len(self.data_seed)
                * len(batches(self.seeds, self.seed_batch)) * len(self.method_groups))

    def options(self) -> str:
        """The cells' options: the training config and the methods' parameters (JSON)."""
        return json.dumps({"train": self.train, "method_params": self.method_params}, sort_keys=True)


@declared
@dataclass(frozen=True)
class SpearSection:
    """``[[spear]]``: SPEAR's ablation (and, if asked, robustness / efficiency, or its comparison
    with other methods: Tab. 1/3) over datasets × β × K, data seeds in batches. The options a
    cell runs with are the keys given (:meth:`options`): a key left out is SPEAR's default."""

    datasets: tuple[str, ...] = param(MISSING, NAMES, help="dataset names or graph files")
    name: str | None = param(None, *TEXT)
    beta: tuple[float, ...] = param((0.05,), BETAS)
    clients: tuple[int, ...] = param((10,), CLIENTS)
    seeds: tuple[int, ...] = param((2024, 2025, 2026), SEEDS)
    seed_batch: int | None = param(None, *BATCH)
    variants: tuple[str, ...] = param(tuple(SPEAR_VARIANTS), Many((Options(tuple(SPEAR_VARIANTS)),)))
    methods: tuple[str, ...] = param(("spear",), NAMES, help="methods compared (Tab. 1/3)")
    T: int | None = like(SpearConfig, "T", None, OMITTED)
    a: float | None = like(SpearConfig, "a", None, OMITTED)
    gamma: float | None = like(SpearConfig, "gamma", None, OMITTED)
    robustness: bool | None = param(None, Flag(), OMITTED)
    rho: float | None = param(None, *SHARE, help="share of perturbed edges")
    eta: float | None = param(None, *SHARE, help="share of perturbed features")
    scope: str | None = param(None, Options(("clients", "global")), OMITTED, help="perturbation scope")
    efficiency: bool | None = param(None, Flag(), OMITTED)
    rounds: int | None = param(None, *ROUNDS)
    run_seed: int | None = param(None, Interval(int, 0, MAX_SEED), OMITTED)
    local_epochs: int | None = param(None, *ROUNDS)
    method_params: dict | None = param(None, METHOD_PARAMS, OMITTED)
    train: dict | None = param(None, TableFor(TrainConfig), OMITTED)

    def validate(self) -> None:
        _check_method_params(self.method_params, {"*": ("rounds", "local_epochs")})

    def n_cells(self) -> int:
        return len(self.datasets) * len(self.beta) * len(self.clients) * len(batches(self.seeds, self.seed_batch))

    def options(self) -> str:
        """The cells' options (JSON): every key given but the cell's own; with ``robustness``,
        the perturbation scope (``clients`` unless given) is part of the cell (docs/DESIGN.md §12)."""
        own = {"datasets", "name", "beta", "clients", "seeds", "seed_batch", "variants", "methods"}
        opts = {k: getattr(self, k) for k in sorted(config_keys(type(self)) - own) if getattr(self, k) is not None}
        if self.robustness:
            opts["scope"] = self.scope or "clients"
        return json.dumps(opts, sort_keys=True)


# -- reading a config's sections ---------------------------------------------------------------
def _read(cfg, cls: type, values: Any, where: str, inherit: Mapping[str, Any] | None = None) -> Any:
    try:
        return read_config(cls, values, where, inherit)
    except FieldError as exc:
        raise cfg.error(str(exc), exc.value, exc.key or where.strip("[]")) from None


def _name(cfg, kind: str, value, valid: Iterable[str], key: str, canon: Callable | None = None) -> str:
    valid = list(valid)
    if canon is not None:
        try:
            return canon(value)
        except PaceNBError:
            pass
    elif value in valid:
        return value
    raise cfg.error(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(sorted(map(str, valid)))}", value, key)


def _dataset(cfg, value: str) -> str:
    """A registered dataset name, or a graph file/folder (docs/OWN_DATA.md; a relative path is
    relative to the config's folder) as an absolute path, validated now."""
    from pace_nb.data.datasets import DATASETS, canonical_name
    from pace_nb.data.userdata import is_graph_path, load_graph

    if value not in DATASETS:
        base = Path(cfg.path).parent if not str(cfg.path).startswith("<") else Path.cwd()
        path = base / Path(value).expanduser()
        if is_graph_path(path):
            try:
                load_graph(path)
            except PaceNBError as exc:
                raise cfg.error(str(exc), value, "datasets") from None
            return str(path.resolve())
    return _name(cfg, "dataset", value, DATASETS, "datasets", canonical_name)


def _experiment(cfg, exp: ExperimentSection, known: list[str]) -> ExperimentSection:
    """``exp`` with its datasets and methods resolved; ``methods_if_available`` joins the methods
    when registered; a method group lists methods of the section."""
    methods = [_name(cfg, "method", m.lower(), known, "methods") for m in exp.methods]
    methods += [m.lower() for m in exp.methods_if_available if m.lower() in known and m.lower() not in methods]
    groups = [tuple(_name(cfg, "method", m.lower(), methods, "method_groups") for m in as_list(g))
              for g in exp.method_groups or [methods]]
    return replace(exp, datasets=tuple(_dataset(cfg, d) for d in exp.datasets), methods=tuple(methods),
                   method_groups=tuple(groups))


def _spear(cfg, sp: SpearSection, known: list[str]) -> SpearSection:
    """``sp`` with its datasets resolved and the methods compared with SPEAR registered ones."""
    methods = tuple(m.lower() for m in sp.methods)
    for m in methods:
        _name(cfg, "method", m, known, "methods")
    return replace(sp, datasets=tuple(_dataset(cfg, d) for d in sp.datasets), methods=methods)


def read_sections(cfg, known_methods: list[str]) -> tuple[GridSection, list[ExperimentSection], list[SpearSection]]:
    """Every section of ``cfg`` read and resolved (``[[experiment]]`` inherits ``[grid]``'s seeds,
    data draws and seed batch); the first error is a :class:`ConfigError` naming its line."""
    for key in cfg.raw:
        if key not in SECTIONS:
            raise cfg.error(f"unknown section {key!r}; valid sections: {', '.join(SECTIONS)}", key)
    grid = _read(cfg, GridSection, cfg.raw.get("grid", {}), "[grid]")
    inherit = {"seeds": grid.seeds, "data_seed": grid.data_seed, "seed_batch": grid.seed_batch}
    exps = [_experiment(cfg, _read(cfg, ExperimentSection, e, "[[experiment]]", inherit), known_methods)
            for e in as_list(cfg.raw.get("experiment", []))]
    spears = [_spear(cfg, _read(cfg, SpearSection, s, "[[spear]]"), known_methods)
              for s in as_list(cfg.raw.get("spear", []))]
    if not exps and not spears:
        raise cfg.error("the config has no [[experiment]] or [[spear]] section")
    return grid, exps, spears
