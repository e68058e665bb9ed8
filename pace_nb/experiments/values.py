"""Typed readers of grid-config values: each value is checked for its type and range as it is
read, so a wrong value is one :class:`~pace_nb.core.errors.ConfigError` naming its config line,
never a traceback later and never a lenient reading (``strict = "no"`` is not true, ``beta =
true`` is not 1). ``cfg`` is a :class:`~pace_nb.experiments.grid.GridConfig` (its ``error``).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

from pace_nb.core.errors import ConfigError
from pace_nb.core.limits import MAX_CELLS, MAX_CLIENTS, MAX_ROUNDS
from pace_nb.core.validation import check_seed, config_from_mapping
from pace_nb.methods.pace.lowrank import check_ranks

#: Largest grid config file read (a config is a few KiB; larger files are refused unread).
MAX_CONFIG_BYTES = 1 << 20


def as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def ints(cfg, key: str, values, minimum: int, maximum: int | None = None, nonempty: bool = True) -> list[int]:
    """Integers in ``[minimum, maximum]`` (a scalar is a one-item list)."""
    vals = as_list(values)
    if nonempty and not vals:
        raise cfg.error(f"{key} needs at least one value, got []", key)
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise cfg.error(f"{key} must be integers >= {minimum}, got {v!r}", v, key)
        if maximum is not None and v > maximum:
            raise cfg.error(f"{key} must be at most {maximum}, got {v!r}", v, key)
        out.append(int(v))
    return out


def clients(cfg, values) -> list[int]:
    return ints(cfg, "clients", values, 2, MAX_CLIENTS)


def rounds(cfg, value, key: str = "rounds") -> int:
    return ints(cfg, key, value, 1, MAX_ROUNDS)[0]


def positive_reals(cfg, key: str, values) -> list[float]:
    """Finite numbers > 0 (a scalar is a one-item list); booleans and text are not numbers."""
    vals = as_list(values)
    if not vals:
        raise cfg.error(f"{key} needs at least one value, got []", key)
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and float(v) > 0):
            raise cfg.error(f"{key} must be finite numbers > 0, got {v!r}", key=key)
        out.append(float(v))
    return out


def unit_real(cfg, key: str, value) -> float:
    """A number in [0, 1] (SPEAR's perturbation rates rho, eta)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) <= 1:
        raise cfg.error(f"{key} must be a number in [0, 1], got {value!r}", key=key)
    return float(value)


def flag(cfg, key: str, value) -> bool:
    """``true`` or ``false`` only."""
    if not isinstance(value, bool):
        raise cfg.error(f"{key} must be true or false, got {value!r}", key=key)
    return value


def text(cfg, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise cfg.error(f"{key} must be a non-empty string, got {value!r}", key=key)
    return value


def table(cfg, key: str, value) -> Mapping:
    """A TOML table / YAML mapping (``train = { epochs = 4 }``)."""
    if not isinstance(value, Mapping):
        raise cfg.error(f"{key} must be a table of settings (e.g. {key} = {{ ... }}), got {value!r}", key=key)
    return value


def method_params(cfg, value) -> Mapping:
    """``method_params = { fedprox = { mu = 0.1 } }``: a table of tables, one per method."""
    table(cfg, "method_params", value)
    for name, params in value.items():
        if not isinstance(params, Mapping):
            raise cfg.error(f"method_params.{name} must be a table of that method's parameters, got {params!r}",
                            key="method_params")
    return value


def ranks(cfg, values) -> list[int]:
    try:
        return list(check_ranks(as_list(values), "ranks"))
    except ConfigError as exc:
        raise cfg.error(str(exc), key="ranks") from None


def seed(cfg, key: str, value) -> int:
    try:
        return check_seed(value, key)
    except ConfigError as exc:
        raise cfg.error(str(exc), key=key) from None


def check_cell_count(cfg, count: int) -> None:
    """Refuse a config expanding to more than :data:`MAX_CELLS` cells, before any is built."""
    if count > MAX_CELLS:
        raise cfg.error(f"the config expands to {count:,} cells, more than the limit of {MAX_CELLS:,}; "
                        f"split it into several configs or use fewer values")


def refuse_yaml_aliases(text_: str, path: str) -> None:
    """Grid configs need no YAML anchors or aliases; refusing them refuses alias bombs (a few
    lines expanding to billions of nodes) and recursive aliases before anything is built."""
    import yaml

    try:
        for event in yaml.parse(text_, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                raise ConfigError(f"{path}:{mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in grid "
                                  f"configs; write the values out")
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot parse YAML: {' '.join(str(exc).split())}") from None


def grid_section(cfg, allowed: set) -> Mapping:
    """``[grid]``, its values checked (the grid loop reads strict / data_root / device from it)."""
    grid = cfg.raw.get("grid", {})
    if not isinstance(grid, Mapping):
        raise cfg.error("[grid] must be a table/mapping", "grid")
    unknown = [k for k in grid if k not in allowed]
    if unknown:
        raise cfg.error(f"unknown key {unknown[0]!r} in [grid]; valid keys: {', '.join(sorted(allowed))}", unknown[0])
    for key in ("name", "description", "device", "data_root"):
        if key in grid:
            text(cfg, key, grid[key])
    if "strict" in grid:
        flag(cfg, "strict", grid["strict"])
    return grid


def table_option(cfg, section: Mapping, key: str, cls, where: str) -> dict:
    value = table(cfg, key, section.get(key, {}))
    if value:
        try:
            config_from_mapping(cls, value, where)
        except ConfigError as exc:
            raise cfg.error(str(exc), key=key) from None
    return dict(value)
