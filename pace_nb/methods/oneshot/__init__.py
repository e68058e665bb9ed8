"""SPEAR's five one-shot FGL baselines on ONE one-shot mechanism (:mod:`.base`); one module per method.

Each method is a :class:`~.base.OneShotMethod` subclass registered with the
:func:`~.base.oneshot_method` decorator in its own module; this package imports them all.
:mod:`.compare` runs SPEAR's comparison (SPEAR, the multi-round baselines and these) on one
Dirichlet federation, every method evaluated by SPEAR's protocol (the server's global model on
the complete graph).
"""
from __future__ import annotations

from pace_nb.methods.oneshot import centroid_sbm, dense, fedcvae, fedsd2c, ghost, oasis  # noqa: F401
from pace_nb.methods.oneshot.base import OneShotMethod, run_oneshot
from pace_nb.core.errors import ConfigError
from pace_nb.methods.registry import METHODS, group

#: SPEAR's one-shot baselines registered by this package, in the paper's order (read from the
#: registry's ``oneshot`` tag; call ``group("oneshot")`` to include methods registered later).
ONESHOT_METHODS: tuple[str, ...] = group("oneshot")


def make_oneshot(name: str, **hyperparameters) -> OneShotMethod:
    """A configured one-shot baseline (``UnknownNameError`` for an unknown name)."""
    cls = METHODS[name]
    if not (isinstance(cls, type) and issubclass(cls, OneShotMethod)):
        raise ConfigError(f"{name!r} is not a one-shot baseline")
    return cls(**hyperparameters)


__all__ = ["ONESHOT_METHODS", "OneShotMethod", "make_oneshot", "run_oneshot"]
