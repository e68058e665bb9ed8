"""SPEAR as a registered method: ``pace-nb run --methods spear``, grid ``methods = ["spear"]``.

SPEAR is training-free (no Local models, no run seed): on the given federation it returns one
row per requested variant (``full`` and the Tab. 4 ablations), exactly the rows of
:func:`pace_nb.methods.spear.analysis.ablation`; ``seed`` is the federation's data seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import pandas as pd

from pace_nb.core.validation import Is, ListOf, check_names, like, param
from pace_nb.core.errors import unknown
from pace_nb.methods.contract import Method, register
from pace_nb.methods.spear.core import VARIANTS, SpearConfig


def _variants(variants: Sequence[str]) -> tuple[str, ...]:
    out = check_names([variants] if isinstance(variants, str) else variants, "SPEAR variants")
    for v in out:
        if v not in VARIANTS:
            raise unknown("SPEAR variant", v, VARIANTS)
    return out


@register
class Spear(Method):
    """SPEAR's rows on a federation for ``variants``; the protocol's seeds and Local models are not
    used (SPEAR has neither); ``T``/``a``/``gamma`` as in :class:`SpearConfig`."""

    name = "spear"
    label = "SPEAR"
    paper = "SPEAR: training-free PPR prototypes with shrinkage"
    description = "SPEAR: training-free PPR prototypes with shrinkage (variants: Tab. 4 ablations)"
    colour, marker = "#0072B2", "o"
    needs = ()
    evaluation = "complete_graph"  # the server's model on the complete graph
    partition = "dirichlet"  # SPEAR's protocol: Dirichlet label skew

    @dataclass(frozen=True)
    class Config:
        T: int = like(SpearConfig, "T")
        a: float = like(SpearConfig, "a")
        gamma: float = like(SpearConfig, "gamma")
        variants: Sequence[str] = param(("full",), Is(str), ListOf((Is(str),)), help="Tab. 4 variants")

    def validate(self) -> None:
        self.spear_config()
        _variants(self.cfg.variants)

    def spear_config(self) -> SpearConfig:
        return SpearConfig(T=self.cfg.T, a=self.cfg.a, gamma=self.cfg.gamma)

    def run(self, fg, local=None, *, seeds=None, device="auto", progress=True, local_logits=None,
            train_config=None) -> pd.DataFrame:
        from pace_nb.methods.spear.analysis import ablation

        return ablation(fg, self.spear_config(), _variants(self.cfg.variants))
