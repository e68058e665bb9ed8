"""Layer 3: the one-shot protocol runner, evaluation, metrics, calibration, and every method.

Importing this package registers every method in :data:`pace_nb.methods.registry.METHODS`;
the plugins' methods (:mod:`pace_nb.methods.plugins`) join on the registry's first read.
"""

from pace_nb.methods import local  # noqa: F401  (registers "local")
from pace_nb.methods.pace import protocol as _pace  # noqa: F401  (registers PACE)
from pace_nb.methods import baselines  # noqa: F401  (registers every federated baseline)
from pace_nb.methods import oneshot  # noqa: F401  (registers SPEAR's one-shot baselines)
from pace_nb.methods.spear import method as _spear  # noqa: F401  (registers SPEAR)
from pace_nb.methods.registry import METHODS
from pace_nb.methods.plugins import load_plugins

METHODS.defer(load_plugins)  # once, after the built-in methods
