"""Collaborative baselines on ONE federated mechanism (:mod:`.base`); one module per method.

Each method is a :class:`~.base.FederatedMethod` subclass registered with the
:func:`~pace_nb.methods.contract.register` decorator in its own module; this package imports them all.
``make_method(name, **hyperparameters)`` builds one; :func:`train_federated` runs R rounds and
returns per-receiver models; :func:`run_federated` also evaluates them (native and +CNLL rows).
``R = 1`` with 100 local epochs is PACE's matched one-round control (the methods tagged
``pace_control``: :func:`pace_nb.methods.registry.group`).
"""
from __future__ import annotations

from pace_nb.methods.baselines import (fedavg, fedprox, fednova, fedrcl, fedpub, fedtad, fedgta,  # noqa: F401
                                       fedaux, fedproto, moon, fedopt)
from pace_nb.methods.baselines.base import (FederatedMethod, FedContext, make_method, mix, run_federated,
                                            train_federated)
from pace_nb.methods.baselines.runs import FederatedRun, evaluate_run
from pace_nb.methods import contract
from pace_nb.methods.registry import METHODS


def method_names() -> list[str]:
    """Registered federated baselines, in registration order."""
    return [e.name for e in METHODS.entries() if isinstance(e.obj, type) and issubclass(e.obj, FederatedMethod)]


def method_class(name: str) -> type[FederatedMethod]:
    """The class of a registered baseline (``UnknownNameError`` for an unknown name)."""
    return contract.method_class(name, FederatedMethod)


__all__ = ["FederatedMethod", "FederatedRun", "FedContext", "evaluate_run", "make_method",
           "method_class", "method_names", "mix", "run_federated", "train_federated"]
