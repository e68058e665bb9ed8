"""SPEAR's five one-shot FGL baselines on ONE one-shot mechanism (:mod:`.base`); one module per method.

Each method is a :class:`~.base.OneShotMethod` subclass registered with the
:func:`~pace_nb.methods.contract.register` decorator in its own module; this package imports them all.
:mod:`.compare` runs SPEAR's comparison (SPEAR, the multi-round baselines and these) on one
Dirichlet federation, every method evaluated by SPEAR's protocol (the server's global model on
the complete graph).
"""
from __future__ import annotations

from pace_nb.methods.oneshot import centroid_sbm, dense, fedcvae, fedsd2c, ghost, oasis  # noqa: F401
from pace_nb.methods.oneshot.base import OneShotMethod, run_oneshot
from pace_nb.methods.contract import make
from pace_nb.methods.registry import group

#: SPEAR's one-shot baselines registered by this package, in the paper's order (read from the
#: registry's ``oneshot`` tag; call ``group("oneshot")`` to include methods registered later).
ONESHOT_METHODS: tuple[str, ...] = group("oneshot")


def make_oneshot(name: str, **hyperparameters) -> OneShotMethod:
    """A configured one-shot baseline (:func:`pace_nb.methods.contract.make` of a :class:`OneShotMethod`)."""
    return make(name, OneShotMethod, **hyperparameters)  # type: ignore[return-value]


__all__ = ["ONESHOT_METHODS", "OneShotMethod", "make_oneshot", "run_oneshot"]
