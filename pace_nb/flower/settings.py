"""The run's settings: what the ServerApp broadcasts to the clients in round 1.

One flat mapping (Flower's ``run_config`` style, so ``flwr run --run-config`` can set any key):
the method, the run seed, PACE's and SPEAR's hyperparameters and the Local training config.
Defaults are the papers' values (:class:`PaceConfig`, :class:`SpearConfig`, :class:`TrainConfig`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Mapping

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import Interval, Options, validate_params
from pace_nb.methods.pace.protocol import PaceConfig, variant_config
from pace_nb.methods.spear.core import SpearConfig
from pace_nb.nn.training import TrainConfig

METHODS = ("pace", "spear")


@dataclass(frozen=True)
class FlowerSettings:
    """One Flower run: ``method`` on ``num_clients`` SuperNodes, one ``seed`` (PACE's run seed)."""

    _parameter_constraints: ClassVar[dict] = {
        "method": [Options(METHODS)],
        "num_clients": [Interval(int, 1, 10_000)],
        "seed": [Interval(int, 0, 2**32 - 1)],
        "rank": [Interval(int, 0, None)],
        "timeout": [Interval(float, 0.0, None, closed="neither")],
        "min_clients": [Interval(int, 1, 10_000)],
        "max_upload_bytes": [Interval(int, 1, None)],
    }
    method: str = "pace"
    num_clients: int = 10
    seed: int = PAPER_SEEDS[0]
    rank: int = 6
    variant: str = "full"
    spear_variant: str = "full"
    T: int = 2
    a: float = 0.5
    gamma: float = 0.1
    hidden: int = 64
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 100
    device: str = "auto"
    timeout: float = 600.0
    min_clients: int = 1
    max_upload_bytes: int = 256 << 20  # the server refuses a larger upload before parsing it

    def __post_init__(self) -> None:
        validate_params(self)
        if self.method == "pace":
            self.pace_config  # validates the variant
        else:
            self.spear_config.for_variant(self.spear_variant)
        self.train_config  # validates

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "FlowerSettings":
        """Settings from a run config (keys with ``-`` or ``_``); unknown keys are an error."""
        names = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {}
        for key, value in (values or {}).items():
            name = str(key).replace("-", "_")
            if name not in names:
                raise ConfigError(f"unknown Flower run setting {key!r}; valid: {', '.join(sorted(names))}")
            kw[name] = value
        for name in ("num_clients", "seed", "rank", "T", "hidden", "epochs", "min_clients", "max_upload_bytes"):
            if name in kw and isinstance(kw[name], float) and float(kw[name]).is_integer():
                kw[name] = int(kw[name])
        return cls(**kw)

    @property
    def pace_config(self) -> PaceConfig:
        return variant_config(self.variant, self.rank)

    @property
    def spear_config(self) -> SpearConfig:
        return SpearConfig(T=self.T, a=self.a, gamma=self.gamma)

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig(hidden=self.hidden, dropout=self.dropout, lr=self.lr, weight_decay=self.weight_decay,
                           epochs=self.epochs)

    def to_record(self) -> dict[str, Any]:
        """Flat values for a Flower ``ConfigRecord`` (what the clients receive)."""
        return asdict(self)
