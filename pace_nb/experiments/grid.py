"""Experiment grids: TOML/YAML config → validated cells (the loop that runs them: :mod:`experiments.runner`).

A *cell* is the unit of work and of storage: (dataset, partition [β], K, data seed, a batch
of run seeds, a group of methods). One cell is ONE :func:`pace_nb.methods.protocol.run_protocol`
call, so the batched trainer trains every seed × client of the cell at once; consecutive cells
of one setting (its method groups) share one Local training (:class:`~pace_nb.experiments.cells.LocalReuse`).
SPEAR cells run SPEAR's ablation (and, if asked, robustness / efficiency) for a batch of data
seeds. :func:`load_config` / :func:`parse_config` validate a config as a whole (errors name the
line); :func:`expand` turns it into cells with stable keys, which
:func:`pace_nb.experiments.runner.run_grid` runs (resumably) and
:func:`pace_nb.experiments.cells.run_cell` computes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Mapping

from pace_nb.core.config import DATA_SEED, PAPER_SEEDS, shipped_configs
from pace_nb.core.errors import ConfigError, PaceNBError
from pace_nb.core.io import NotRegularFileError, read_regular_bytes
from pace_nb.experiments import preflight, values as V
from pace_nb.core.validation import check_seeds, config_keys
from pace_nb.experiments.cells import Cell
from pace_nb.methods.spear.core import SpearConfig
from pace_nb.nn.training import TrainConfig

PARTITIONS = ("louvain", "metis", "dirichlet", "given")  # given: a graph file's own client column
SECTIONS = {"grid", "experiment", "spear"}
GRID_KEYS = {"name", "description", "seeds", "data_seed", "seed_batch", "device", "strict", "data_root"}
EXPERIMENT_KEYS = {"name", "datasets", "partitions", "beta", "clients", "seeds", "data_seed", "seed_batch",
                   "methods", "methods_if_available", "method_groups", "pace_variants", "ranks", "train", "method_params"}
#: [[spear]] keys: the grid's own plus every SpearConfig field (T, a, gamma).
SPEAR_KEYS = {"name", "datasets", "beta", "clients", "seeds", "seed_batch", "variants",
              "robustness", "rho", "eta", "scope", "efficiency", "rounds"} | config_keys(SpearConfig)
#: [[spear]] keys of SPEAR's comparison (Tab. 1/3): methods beside SPEAR, run seed, their parameters.
SPEAR_KEYS |= {"methods", "run_seed", "local_epochs", "method_params", "train"}


@dataclass
class GridConfig:
    """A parsed config: the raw mapping, its text (for line numbers) and where it came from."""

    raw: dict
    text: str = ""
    path: str = "<config>"

    def line_of(self, value: Any, key: str | None = None) -> int | None:
        """First line (1-based) holding ``value`` (after ``key =`` when given), comments ignored."""
        token = re.escape(str(value))
        pats = [rf"""["']{token}["']""", rf"(?<![\w.-]){token}(?![\w.-])"]
        lines = [ln.split("#", 1)[0] for ln in self.text.splitlines()]
        for pat in pats:
            hits = [i for i, ln in enumerate(lines) if re.search(pat, ln, re.IGNORECASE)]
            if key is not None:
                keyed = [i for i in hits if re.search(rf"\b{re.escape(key)}\b", lines[i])]
                hits = keyed or hits
            if hits:
                return hits[0] + 1
        return None

    def error(self, msg: str, value: Any = None, key: str | None = None) -> ConfigError:
        line = self.line_of(value, key) if value is not None else None
        if line is None and key is not None:
            line = self.line_of(key)
        return ConfigError(f"{self.path}:{line}: {msg}" if line else f"{self.path}: {msg}")


def config_path(path: str | Path) -> Path:
    """``path`` when it exists, else the shipped config it names — ``quick``, ``quick.toml`` or
    ``configs/quick.toml`` (:func:`~pace_nb.core.config.shipped_configs`: the checkout's ``configs/``,
    or the copy in the installed package, so a README command works outside a checkout too)."""
    path = Path(path)
    if path.exists() or path.suffix not in ("", ".toml") or path.parent not in (Path("."), Path("configs")):
        return path
    return shipped_configs().get(path.stem if path.suffix else path.name, path)


def load_config(path: str | Path) -> GridConfig:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) grid config (a path, or the name of a shipped
    config: :func:`config_path`); validation is separate."""
    path = config_path(path)
    if path.is_dir():
        raise ConfigError(f"grid config {path} is a folder; give a .toml or .yaml file (see configs/)")
    try:
        if path.exists() and path.stat().st_size > V.MAX_CONFIG_BYTES:
            raise ConfigError(f"grid config {path} is {path.stat().st_size:,} bytes, more than the "
                              f"{V.MAX_CONFIG_BYTES:,} a config may have")
        text = read_regular_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"grid config {path} not found (shipped configs: {', '.join(shipped_configs()) or 'none'})") from None
    except NotRegularFileError:
        raise ConfigError(f"grid config {path} is not a regular file (a FIFO or device); give a .toml or .yaml file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"grid config {path} is not UTF-8 text (byte {exc.start}); give a .toml or .yaml file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read grid config {path} ({exc.strerror or exc})") from None
    return parse_config(text, path=str(path), fmt="yaml" if path.suffix in (".yaml", ".yml") else "toml")


def parse_config(text: str, path: str = "<config>", fmt: str = "toml") -> GridConfig:
    try:
        if fmt == "yaml":
            import yaml

            V.refuse_yaml_aliases(text, path)
            raw = yaml.safe_load(text) or {}
        else:
            import tomllib

            raw = tomllib.loads(text)
    except ConfigError:
        raise
    except Exception as exc:  # parser errors carry the line number
        raise ConfigError(f"{path}: cannot parse {fmt.upper()}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping with [grid]/[[experiment]]/[[spear]] sections")
    return GridConfig(raw, text, path)


_as_list, _ints = V.as_list, V.ints


def _seeds(cfg: GridConfig, key: str, values) -> list[int]:
    """Seeds: distinct integers in [0, 2**32 - 1] (the one wording of core.validation)."""
    vals = _ints(cfg, key, values, 0)
    try:
        return list(check_seeds(vals, key))
    except ConfigError as exc:
        raise cfg.error(str(exc), key) from None


def _batches(seeds: list[int], size: int | None) -> list[tuple[int, ...]]:
    size = size or len(seeds)
    return [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]


def _check_keys(cfg: GridConfig, section: Mapping, allowed: set, where: str) -> None:
    if not isinstance(section, Mapping):
        raise cfg.error(f"{where} must be a table/mapping", where.strip("[]"))
    for key in section:
        if key not in allowed:
            raise cfg.error(f"unknown key {key!r} in {where}; valid keys: {', '.join(sorted(allowed))}", key)


def _name(cfg: GridConfig, kind: str, value, valid: Iterable[str], key: str, canon: Callable | None = None) -> str:
    valid = list(valid)
    if canon is not None:
        try:
            return canon(value)
        except PaceNBError:
            pass
    elif value in valid:
        return value
    raise cfg.error(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(sorted(map(str, valid)))}", value, key)


def _dataset(cfg: GridConfig, value) -> str:
    """A registered dataset name, or a graph file/folder (docs/OWN_DATA.md; a relative path is
    relative to the config's folder) as an absolute path, validated now."""
    from pace_nb.data.datasets import DATASETS, canonical_name
    from pace_nb.data.userdata import is_graph_path, load_graph

    if isinstance(value, str) and value not in DATASETS:
        base = Path(cfg.path).parent if not str(cfg.path).startswith("<") else Path.cwd()
        path = base / Path(value).expanduser()
        if is_graph_path(path):
            try:
                load_graph(path)
            except PaceNBError as exc:
                raise cfg.error(str(exc), value, "datasets") from None
            return str(path.resolve())
    return _name(cfg, "dataset", value, DATASETS, "datasets", canonical_name)


def _given_clients(cfg: GridConfig, dataset: str) -> int:
    """K of the 'given' partition: the number of clients in the graph file's client column."""
    from pace_nb.data.userdata import load_graph

    data = load_graph(dataset) if Path(dataset).is_absolute() else None
    if data is None or "client" not in data:
        raise cfg.error(f"partition 'given' needs a graph file with a client column; {dataset} has none",
                        "given", "partitions")
    return int(data.client.max()) + 1


def _method_params(cfg: GridConfig, value: Any, section_keys: Mapping[str, tuple[str, ...]]) -> None:
    """Check a section's ``method_params``: known methods, known parameter names, valid values;
    ``section_keys[method]`` (``"*"``: every method) are set by the section's own keys and may not
    be repeated per method."""
    from pace_nb.methods.registry import check_all_method_params

    try:
        checked = check_all_method_params(value)
    except PaceNBError as exc:
        raise cfg.error(str(exc), "method_params") from None
    for method, params in checked.items():
        clash = sorted(set(params) & set(section_keys.get(method, ()) + section_keys.get("*", ())))
        if clash:
            raise cfg.error(f"method_params.{method}: {', '.join(clash)} is set for the whole section, "
                            f"not per method", clash[0], "method_params")


def expand(cfg: GridConfig, known_methods: Iterable[str] | None = None, *, data_root=None,
           fingerprints: bool = True) -> list[Cell]:
    """Validate the WHOLE config and expand it into cells (no training is done here).

    Unknown datasets, methods, partitions, variants or keys, and values of a wrong type or range
    raise :class:`ConfigError` naming the config line at fault; so does a config of more than
    :data:`~pace_nb.core.limits.MAX_CELLS` cells (counted before any is built). ``known_methods``
    defaults to the protocol registry. ``fingerprints``: each cell carries its dataset's
    :func:`~pace_nb.data.datasets.data_fingerprint` (raw files under ``data_root`` >
    ``[grid] data_root`` > the default root); without, cells have their setting keys only.
    """
    from pace_nb.methods.pace.protocol import VARIANTS as PACE_VARIANTS
    from pace_nb.methods.spear.core import VARIANTS as SPEAR_VARIANTS

    if known_methods is None:
        from pace_nb.methods.protocol import available_methods

        known_methods = available_methods()
    known_methods = list(known_methods)
    from pace_nb.methods.registry import registered, shared_options

    shared = {e.name: shared_options(e.name) for e in registered().entries()}  # set by pace_variants / ranks
    raw = cfg.raw
    for key in raw:
        if key not in SECTIONS:
            raise cfg.error(f"unknown section {key!r}; valid sections: grid, experiment, spear", key)
    grid = V.grid_section(cfg, GRID_KEYS)
    base_seeds = _seeds(cfg, "seeds", grid.get("seeds", list(PAPER_SEEDS)))
    base_data_seeds = _seeds(cfg, "data_seed", grid.get("data_seed", DATA_SEED))
    base_batch = grid.get("seed_batch")
    if base_batch is not None:
        base_batch = _ints(cfg, "seed_batch", base_batch, 1)[0]
    specs: list[tuple] = []  # (kind, checked values) of every section; cells are built once all are valid
    exps, spears = _as_list(raw.get("experiment", [])), _as_list(raw.get("spear", []))
    if not exps and not spears:
        raise cfg.error("the config has no [[experiment]] or [[spear]] section")
    count = 0
    for exp in exps:
        _check_keys(cfg, exp, EXPERIMENT_KEYS, "[[experiment]]")
        if "datasets" not in exp or "methods" not in exp:
            raise cfg.error("every [[experiment]] needs 'datasets' and 'methods'", "experiment")
        if not _as_list(exp["datasets"]) or not _as_list(exp["methods"]):
            raise cfg.error("'datasets' and 'methods' of an [[experiment]] need at least one value each", "methods")
        datasets = [_dataset(cfg, d) for d in _as_list(exp["datasets"])]
        parts = [_name(cfg, "partition", p, PARTITIONS, "partitions") for p in _as_list(exp.get("partitions", "louvain"))]
        betas = V.positive_reals(cfg, "beta", exp.get("beta", 0.5))
        clients = V.clients(cfg, exp.get("clients", 10))
        seeds = _seeds(cfg, "seeds", exp.get("seeds", base_seeds))
        data_seeds = _seeds(cfg, "data_seed", exp.get("data_seed", base_data_seeds))  # one draw each
        batch = _ints(cfg, "seed_batch", exp.get("seed_batch", base_batch if base_batch is not None else len(seeds)), 1)[0]
        methods = [_name(cfg, "method", str(m).lower(), known_methods, "methods") for m in _as_list(exp["methods"])]
        if len(set(methods)) != len(methods):
            raise cfg.error(f"methods: duplicated value(s) {sorted({m for m in methods if methods.count(m) > 1})}", "methods")
        methods += [str(m).lower() for m in _as_list(exp.get("methods_if_available", []))
                    if str(m).lower() in known_methods and str(m).lower() not in methods]
        groups = exp.get("method_groups") or [methods]
        groups = [[_name(cfg, "method", str(m).lower(), methods, "method_groups") for m in _as_list(g)] for g in groups]
        if any(not g for g in groups):
            raise cfg.error("method_groups: every group needs at least one method", "method_groups")
        variants = [_name(cfg, "PACE variant", v, PACE_VARIANTS, "pace_variants") for v in _as_list(exp.get("pace_variants", "full"))]
        if not variants:
            raise cfg.error("pace_variants needs at least one value, got []", "pace_variants")
        ranks = V.ranks(cfg, exp.get("ranks", 6))
        options = {"train": V.table_option(cfg, exp, "train", TrainConfig, "[experiment.train]"),
                   "method_params": dict(V.method_params(cfg, exp.get("method_params", {})))}
        _method_params(cfg, options["method_params"], shared)  # pace_variants, ranks
        n_parts = sum(len(betas) if p == "dirichlet" else 1 for p in parts)
        count += len(datasets) * n_parts * len(clients) * len(data_seeds) * len(_batches(seeds, batch)) * len(groups)
        V.check_cell_count(cfg, count)
        specs.append(("protocol", datasets, parts, betas, clients, data_seeds, seeds, batch, groups, variants, ranks,
                      json.dumps(options, sort_keys=True)))
    for sp in spears:
        _check_keys(cfg, sp, SPEAR_KEYS, "[[spear]]")
        if "datasets" not in sp or not _as_list(sp["datasets"]):
            raise cfg.error("every [[spear]] needs 'datasets'", "spear")
        datasets = [_dataset(cfg, d) for d in _as_list(sp["datasets"])]
        variants = [_name(cfg, "SPEAR variant", v, SPEAR_VARIANTS, "variants") for v in _as_list(sp.get("variants", list(SPEAR_VARIANTS)))]
        if not variants:
            raise cfg.error("variants needs at least one value, got []", "variants")
        seeds = _seeds(cfg, "seeds", sp.get("seeds", [2024, 2025, 2026]))
        batch = _ints(cfg, "seed_batch", sp.get("seed_batch", len(seeds)), 1)[0]
        betas = V.positive_reals(cfg, "beta", sp.get("beta", 0.05))
        clients = V.clients(cfg, sp.get("clients", 10))
        for key in ("robustness", "efficiency"):
            if key in sp:
                V.flag(cfg, key, sp[key])
        for key in ("rho", "eta"):
            if key in sp:
                V.unit_real(cfg, key, sp[key])
        if "rounds" in sp:
            V.rounds(cfg, sp["rounds"])
        if "local_epochs" in sp:
            V.rounds(cfg, sp["local_epochs"], "local_epochs")
        if "run_seed" in sp:
            V.seed(cfg, "run_seed", sp["run_seed"])
        if "method_params" in sp:
            V.method_params(cfg, sp["method_params"])
        if "train" in sp:
            V.table_option(cfg, sp, "train", TrainConfig, "[spear.train]")
        opts = {k: sp[k] for k in sorted(config_keys(SpearConfig) | {"robustness", "rho", "eta", "scope", "efficiency", "rounds",
                                                                      "run_seed", "local_epochs", "method_params", "train"})
                if k in sp}
        if opts.get("robustness"):  # the perturbation scope is part of the cell (docs/DESIGN.md §12)
            opts["scope"] = _name(cfg, "perturbation scope", opts.get("scope", "clients"), ("clients", "global"), "scope")
        try:
            SpearConfig(**{k: opts[k] for k in config_keys(SpearConfig) if k in opts})
        except ConfigError as exc:
            raise cfg.error(str(exc), "spear") from None
        compared = [str(m).lower() for m in _as_list(sp.get("methods", ["spear"]))]
        if not compared:
            raise cfg.error("methods needs at least one value, got []", "methods")
        for m in compared:
            _name(cfg, "method", m, known_methods, "methods")
        _method_params(cfg, opts.get("method_params"), {"*": ("rounds", "local_epochs")})
        count += len(datasets) * len(betas) * len(clients) * len(_batches(seeds, batch))
        V.check_cell_count(cfg, count)
        specs.append(("spear", datasets, betas, clients, seeds, batch, compared, variants, json.dumps(opts, sort_keys=True)))
    data = preflight.fingerprints({d for spec in specs for d in spec[1]}, data_root or grid.get("data_root")) if fingerprints else {}
    cells: list[Cell] = []
    for spec in specs:
        if spec[0] == "protocol":
            _, datasets, parts, betas, clients, data_seeds, seeds, batch, groups, variants, ranks, options = spec
            for d in datasets:
                for p in parts:
                    for b in (betas if p == "dirichlet" else [None]):
                        for k in (clients if p != "given" else [_given_clients(cfg, d)]):
                            for ds in data_seeds:
                                for sb in _batches(seeds, batch):
                                    for g in groups:
                                        cells.append(Cell("protocol", d, p, k, b, ds, sb, tuple(g), tuple(variants),
                                                          tuple(ranks), options, data.get(d, "")))
        else:
            _, datasets, betas, clients, seeds, batch, compared, variants, opts = spec
            for d in datasets:
                for b in betas:
                    for k in clients:
                        for sb in _batches(seeds, batch):
                            cells.append(Cell("spear", d, "dirichlet", k, b, sb[0], sb, tuple(compared), tuple(variants),
                                              (0,), opts, data.get(d, "")))
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):  # repeated entries are run once
        cells = list({c.key: c for c in cells}.values())
    return cells
