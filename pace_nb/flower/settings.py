"""The run's settings: what the ServerApp broadcasts to the clients in round 1.

One flat mapping (Flower's ``run_config`` style, so ``flwr run --run-config`` can set any key):
the method (any method of :func:`pace_nb.flower.adapters.flower_methods`), the run seed, the
method's hyperparameters as ``params`` (a JSON object of its ``Config`` fields, the in-process
names: PACE's ``variants`` / ``ranks``, SPEAR's ``T`` / ``a`` / ``gamma`` / ``variants``; checked by
the registry, one configuration per round: a list option holds one value) and the Local / server
training config. Defaults are the papers' values (each method's ``Config``, :class:`TrainConfig`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any
from collections.abc import Mapping

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import Interval, Is, declared, like, param, validate_params
from pace_nb.flower.adapters import check_settings, method_params, resolve_method
from pace_nb.nn.training import TrainConfig

@declared
@dataclass(frozen=True)
class FlowerSettings:
    """One Flower run: ``method`` on ``num_clients`` SuperNodes, one ``seed`` (PACE's run seed)."""

    method: str = param("pace", Is(str))
    num_clients: int = param(10, Interval(int, 1, 10_000))
    seed: int = param(PAPER_SEEDS[0], Interval(int, 0, 2**32 - 1))
    # the Local / server training config (flat: Flower's run_config is one flat mapping)
    hidden: int = like(TrainConfig, "hidden")
    dropout: float = like(TrainConfig, "dropout")
    lr: float = like(TrainConfig, "lr")
    weight_decay: float = like(TrainConfig, "weight_decay")
    epochs: int = like(TrainConfig, "epochs")
    device: str = param("auto", Is(str))
    timeout: float = param(600.0, Interval(float, 0.0, None, closed="neither"))
    min_clients: int = param(1, Interval(int, 1, 10_000))
    # the server refuses a larger upload before parsing it
    max_upload_bytes: int = param(256 << 20, Interval(int, 1, None))
    # the method's hyperparameters (its Config's names), a JSON object
    params: str = param("{}", Is(str))

    def __post_init__(self) -> None:
        if not isinstance(self.method, str):
            raise ConfigError(f"Flower setting method must be a method name, got {self.method!r}")
        object.__setattr__(self, "method", resolve_method(self.method))  # the registry's id
        if not isinstance(self.params, str):
            object.__setattr__(self, "params", json.dumps(method_params(self.params), sort_keys=True))
        validate_params(self)
        method_params(self.params)  # a JSON object
        check_settings(self)  # the method's own hyperparameters: valid, one configuration
        _ = self.train_config  # validates

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> FlowerSettings:
        """Settings from a run config (keys with ``-`` or ``_``); unknown keys are an error."""
        names = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {}
        for key, value in (values or {}).items():
            name = str(key).replace("-", "_")
            if name not in names:
                hint = _hyperparameter_hint(name, (values or {}).get("method", cls.__dataclass_fields__["method"].default))
                raise ConfigError(f"unknown Flower run setting {key!r}{hint}; valid: {', '.join(sorted(names))}")
            kw[name] = value
        for name in ("num_clients", "seed", "hidden", "epochs", "min_clients", "max_upload_bytes"):
            if name in kw and isinstance(kw[name], float) and float(kw[name]).is_integer():
                kw[name] = int(kw[name])
        return cls(**kw)

    @property
    def method_params(self) -> dict[str, Any]:
        """The ``params`` setting as a mapping (the method's hyperparameters)."""
        return json.loads(self.params)

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig(hidden=self.hidden, dropout=self.dropout, lr=self.lr, weight_decay=self.weight_decay,
                           epochs=self.epochs)

    def to_record(self) -> dict[str, Any]:
        """Flat values for a Flower ``ConfigRecord`` (what the clients receive)."""
        return asdict(self)


def _hyperparameter_hint(name: str, method: Any) -> str:
    """Where a method's hyperparameter given as a run setting belongs (settings hold only the
    shared run; the method's own live in ``params``): ``""`` when ``name`` is none of them."""
    import difflib

    from pace_nb.methods.contract import Method, method_class

    try:
        cls: type[Method] = method_class(resolve_method(str(method)))
    except ConfigError:
        return ""
    own = [f.name for f in fields(cls.Config)] + list(getattr(cls, "shared_options", ()))
    close = difflib.get_close_matches(name, own, n=1, cutoff=0.75)
    if not close:
        return ""
    return (f": {close[0]!r} is a hyperparameter of method {cls.name!r}; give it in the params setting, "
            f"e.g. params = '{{\"{close[0]}\": ...}}'")

