"""Experiment grids: TOML/YAML config → validated cells (the loop that runs them: :mod:`experiments.runner`).

A *cell* is the unit of work and of storage: (dataset, partition [β], K, data seed, a batch
of run seeds, a group of methods). One cell is ONE :func:`pace_nb.methods.protocol.run_protocol`
call, so the batched trainer trains every seed × client of the cell at once; consecutive cells
of one setting (its method groups) share one Local training (:class:`~pace_nb.experiments.cells.LocalReuse`).
SPEAR cells run SPEAR's ablation (and, if asked, robustness / efficiency) for a batch of data
seeds. :func:`load_config` / :func:`parse_config` read a config; :func:`expand` validates it as a
whole (its sections are declared in :mod:`~pace_nb.experiments.sections`; errors name the line)
and turns it into cells with stable keys, which
:func:`pace_nb.experiments.runner.run_grid` runs (resumably) and
:func:`pace_nb.experiments.cells.run_cell` computes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator, Mapping

from pace_nb.core.config import shipped_configs
from pace_nb.core.errors import ConfigError
from pace_nb.core.io import NotRegularFileError, read_regular_bytes
from pace_nb.core.limits import MAX_CELLS
from pace_nb.experiments import preflight
from pace_nb.experiments.cells import Cell
from pace_nb.experiments.sections import ExperimentSection, SpearSection, batches, read_sections

#: Largest grid config file read (a config is a few KiB; larger files are refused unread).
MAX_CONFIG_BYTES = 1 << 20


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
        if path.exists() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"grid config {path} is {path.stat().st_size:,} bytes, more than the "
                              f"{MAX_CONFIG_BYTES:,} a config may have")
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


def refuse_yaml_aliases(text: str, path: str) -> None:
    """Grid configs need no YAML anchors or aliases; refusing them refuses alias bombs (a few
    lines expanding to billions of nodes) and recursive aliases before anything is built."""
    import yaml

    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                raise ConfigError(f"{path}:{mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in grid "
                                  f"configs; write the values out")
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot parse YAML: {' '.join(str(exc).split())}") from None


def parse_config(text: str, path: str = "<config>", fmt: str = "toml") -> GridConfig:
    try:
        if fmt == "yaml":
            import yaml

            refuse_yaml_aliases(text, path)
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


def check_cell_count(cfg: GridConfig, count: int) -> None:
    """Refuse a config expanding to more than :data:`MAX_CELLS` cells, before any is built."""
    if count > MAX_CELLS:
        raise cfg.error(f"the config expands to {count:,} cells, more than the limit of {MAX_CELLS:,}; "
                        f"split it into several configs or use fewer values")


def _given_clients(cfg: GridConfig, dataset: str) -> int:
    """K of the 'given' partition: the number of clients in the graph file's client column."""
    from pace_nb.data.userdata import load_graph

    data = load_graph(dataset) if Path(dataset).is_absolute() else None
    if data is None or "client" not in data:
        raise cfg.error(f"partition 'given' needs a graph file with a client column; {dataset} has none",
                        "given", "partitions")
    return int(data.client.max()) + 1


def _protocol_cells(cfg: GridConfig, exp: ExperimentSection, data: Mapping[str, str]) -> Iterator[Cell]:
    options = exp.options()
    for d, p in product(exp.datasets, exp.partitions):
        betas = exp.beta if p == "dirichlet" else (None,)
        clients = exp.clients if p != "given" else (_given_clients(cfg, d),)
        for b, k, ds, sb, g in product(betas, clients, exp.data_seed, batches(exp.seeds, exp.seed_batch), exp.method_groups):
            yield Cell("protocol", d, p, k, b, ds, sb, g, exp.pace_variants, exp.ranks, options, data.get(d, ""))


def _spear_cells(sp: SpearSection, data: Mapping[str, str]) -> Iterator[Cell]:
    options = sp.options()
    for d, b, k, sb in product(sp.datasets, sp.beta, sp.clients, batches(sp.seeds, sp.seed_batch)):
        yield Cell("spear", d, "dirichlet", k, b, sb[0], sb, sp.methods, sp.variants, (0,), options, data.get(d, ""))


def expand(cfg: GridConfig, known_methods: Iterable[str] | None = None, *, data_root=None,
           fingerprints: bool = True) -> list[Cell]:
    """Validate the WHOLE config and expand it into cells (no training is done here).

    The sections are read first (:func:`~pace_nb.experiments.sections.read_sections`: unknown
    datasets, methods, partitions, variants or keys, and values of a wrong type or range raise
    :class:`ConfigError` naming the config line at fault); so does a config of more than
    :data:`~pace_nb.core.limits.MAX_CELLS` cells (counted before any is built). ``known_methods``
    defaults to the protocol registry. ``fingerprints``: each cell carries its dataset's
    :func:`~pace_nb.data.datasets.data_fingerprint` (raw files under ``data_root`` >
    ``[grid] data_root`` > the default root); without, cells have their setting keys only.
    Repeated cells are listed once.
    """
    if known_methods is None:
        from pace_nb.methods.protocol import available_methods

        known_methods = available_methods()
    grid, exps, spears = read_sections(cfg, list(known_methods))
    sections: list[ExperimentSection | SpearSection] = [*exps, *spears]
    check_cell_count(cfg, sum(s.n_cells() for s in sections))
    datasets = {d for s in sections for d in s.datasets}
    data = preflight.fingerprints(datasets, data_root or grid.data_root) if fingerprints else {}
    cells = [*(c for e in exps for c in _protocol_cells(cfg, e, data)), *(c for s in spears for c in _spear_cells(s, data))]
    return list({c.key: c for c in cells}.values())
