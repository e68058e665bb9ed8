"""Collaborative baselines on ONE federated mechanism (:mod:`.base`); one module per method.

``make_method(name, **hyperparameters)`` builds a method; :func:`train_federated` runs R rounds
and returns per-receiver models; :func:`run_federated` also evaluates them (native and +CNLL
rows). ``R = 1`` with 100 local epochs is PACE's matched one-round control.
"""
from __future__ import annotations

from importlib import import_module

from ..errors import unknown
from .base import FederatedMethod, FederatedRun, FedContext, evaluate_run, mix, run_federated, train_federated

#: registry name → (module, class). PACE Table 1 controls first, then SPEAR / extra methods.
_METHODS: dict[str, tuple[str, str]] = {
    "fedavg": ("fedavg", "FedAvg"),
    "fedprox": ("fedprox", "FedProx"),
    "fednova": ("fednova", "FedNova"),
    "fedrcl": ("fedrcl", "FedRCL"),
    "fedpub": ("fedpub", "FedPub"),
    "fedtad": ("fedtad", "FedTAD"),
    "fedgta": ("fedgta", "FedGTA"),
    "fedaux1r": ("fedaux", "FedAux"),
    "fedproto": ("fedproto", "FedProto"),
    "moon": ("moon", "MOON"),
    "fedadam": ("fedopt", "FedAdam"),
}
#: The eight matched one-round controls of PACE Table 1 / Table 7.
PACE_CONTROLS: tuple[str, ...] = ("fedavg", "fedprox", "fednova", "fedrcl", "fedpub", "fedtad", "fedgta", "fedaux1r")
ALIASES = {"fedaux": "fedaux1r", "fedaux-1r": "fedaux1r", "fedopt": "fedadam"}


def method_names() -> list[str]:
    return list(_METHODS)


def method_class(name: str) -> type[FederatedMethod]:
    key = ALIASES.get(str(name).lower(), str(name).lower())
    if key not in _METHODS:
        raise unknown("method", name, _METHODS)
    mod, cls = _METHODS[key]
    return getattr(import_module(f".{mod}", __name__), cls)


def make_method(name: str, **hyperparameters) -> FederatedMethod:
    """A configured method; unknown name → ``UnknownNameError`` listing the valid ones."""
    return method_class(name)(**hyperparameters)


def _protocol_runner(name: str):
    """Adapter to :func:`pace_nb.protocol.register_method`'s method signature."""

    def run(fg, local, *, seeds=None, device="auto", progress: bool = True, local_logits=None, train_config=None,
            rounds: int = 1, local_epochs: int | None = None, **params):
        import dataclasses as _dc

        from ..training import TrainConfig
        from .base import evaluate_run

        cls = method_class(name)
        known = {f.name for f in _dc.fields(cls.Config)}
        method = cls(**{k: v for k, v in params.items() if k in known})
        config = train_config or TrainConfig()
        seeds = tuple(local.seeds) if seeds is None else tuple(int(s) for s in seeds)
        if local is None or tuple(local.seeds) != seeds:
            from ..training import train_local

            local = train_local(fg, seeds, config, device=device, progress=progress)
            local_logits = None
        fed = train_federated(fg, method, rounds, local_epochs, seeds, config=config, local=local, device=device,
                              progress=progress)
        return evaluate_run(fg, fed, local, local_logits=local_logits)

    run.__name__ = f"run_{name}"
    return run


def _register() -> None:
    from ..protocol import register_method

    for name in _METHODS:
        cls = method_class(name)
        register_method(name, _protocol_runner(name), description=f"{cls.label}: {cls.paper}")


_register()

__all__ = ["FederatedMethod", "FederatedRun", "FedContext", "PACE_CONTROLS", "evaluate_run", "make_method",
           "method_class", "method_names", "mix", "run_federated", "train_federated"]
