"""SPEAR as a registered method: ``pace-nb run --methods spear``, grid ``methods = ["spear"]``.

SPEAR is training-free (no Local models, no run seed): on the given federation it returns one
row per requested variant (``full`` and the Tab. 4 ablations), exactly the rows of
:func:`pace_nb.methods.spear.analysis.ablation`; ``seed`` is the federation's data seed.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from pace_nb.core.validation import check_names
from pace_nb.methods.registry import register_method
from pace_nb.methods.spear.core import VARIANTS, SpearConfig


def check_spear_params(params: dict[str, Any]) -> None:
    """Validate SPEAR's hyperparameters: T, a, gamma (:class:`SpearConfig`) and ``variants``."""
    SpearConfig(**{k: v for k, v in params.items() if k != "variants"})
    _variants(params.get("variants", ("full",)))


def _variants(variants: Sequence[str]) -> tuple[str, ...]:
    from pace_nb.core.errors import unknown

    out = check_names([variants] if isinstance(variants, str) else variants, "SPEAR variants")
    for v in out:
        if v not in VARIANTS:
            raise unknown("SPEAR variant", v, VARIANTS)
    return out


@register_method("spear", needs=(), label="SPEAR", check=check_spear_params,
                 description="SPEAR: training-free PPR prototypes with shrinkage (variants: Tab. 4 ablations)")
def run_spear_method(fg, local=None, *, seeds: Sequence[int] | None = None, device="auto", progress: bool = True,
                     local_logits: dict | None = None, train_config=None, T: int = 2, a: float = 0.5,
                     gamma: float = 0.1, variants: Sequence[str] = ("full",)) -> pd.DataFrame:
    """SPEAR's rows on ``fg`` for ``variants``; the protocol's seeds and models are not used
    (SPEAR has neither), ``T``/``a``/``gamma`` as in :class:`SpearConfig`."""
    from pace_nb.methods.spear.analysis import ablation

    return ablation(fg, SpearConfig(T=T, a=a, gamma=gamma), _variants(variants))
