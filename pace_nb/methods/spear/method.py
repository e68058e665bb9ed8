"""SPEAR as a registered method: ``pace-nb run --methods spear``, grid ``methods = ["spear"]``.

SPEAR is training-free (no Local models, no run seed): on the given federation it returns one
row per requested variant (``full`` and the Tab. 4 ablations), the rows of
:func:`pace_nb.methods.spear.analysis.ablation`; ``seed`` is the federation's data seed. Each
variant is one round of its hooks: the clients' prototype uploads as bytes, the server's
aggregation of the parsed uploads, the global prototypes scored on the complete graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

import pandas as pd

from pace_nb.core.validation import Is, ListOf, check_names, like, param
from pace_nb.core.errors import unknown
from pace_nb.methods.contract import OneRoundMethod, register
from pace_nb.methods.phases import Failure, PublicView, Round, ServerResult, Upload, UploadSpec
from pace_nb.methods.spear import core as sp
from pace_nb.methods.spear.core import VARIANTS, SpearConfig


def _variants(variants: Sequence[str]) -> tuple[str, ...]:
    out = check_names([variants] if isinstance(variants, str) else variants, "SPEAR variants")
    for v in out:
        if v not in VARIANTS:
            raise unknown("SPEAR variant", v, VARIANTS)
    return out


@register
class Spear(OneRoundMethod):
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
    one_per_round = ("variants",)

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

    # -- the round hooks (one variant) --------------------------------------------------------------
    @property
    def variant(self) -> str:
        self.check_round()
        return _variants(self.cfg.variants)[0]

    def client_upload(self, rnd: Round, client, local=None) -> Upload:
        """PPR prototypes and counts of the client's training nodes (nothing without any)."""
        if client.num_nodes == 0 or not bool(client.train_mask.any()):
            return Upload(b"")  # holds no class: sends nothing (as sp.upload_bytes counts it)
        cfg, _ = self.spear_config().for_variant(self.variant)
        z = sp.ppr_propagate(client.x, client.edge_index, cfg.T, cfg.a)
        return Upload(sp.serialize_upload(*sp.class_prototypes(z, client.y, client.train_mask, rnd.view.num_classes)))

    def upload_spec(self, config, view: PublicView | None, client: int) -> UploadSpec:
        return UploadSpec("prototypes", empty_ok=True, compared="prototype widths",
                          num_features=None if view is None else view.num_features,
                          max_count=None if view is None else view.num_nodes[client])

    def server_aggregate(self, rnd: Round, uploads: Sequence[tuple[int, bytes]],
                         failures: Sequence[Failure] = ()) -> ServerResult:
        """The uploads parsed, in client order (an empty one: zero counts) → (P, N)."""
        c = rnd.view.num_classes
        return ServerResult(state=sp.stack_uploads([sp.parse_upload(b, c) for _, b in sorted(uploads)], c))

    def graph_rows(self, rnd: Round, state: Any, graph: Any, up: Sequence[int], client_seconds: float,
                   server_seconds: float) -> list[dict[str, Any]]:
        from pace_nb.methods.spear.analysis import spear_row

        v = self.variant
        r = sp.run_spear(graph, self.spear_config(), v, uploads=state)
        return [spear_row(graph, v, r.acc, r.config, label=sp.VARIANT_LABELS[v], val_acc=100 * r.val_acc,
                          n_test=int(graph.global_mask("test").sum()), bytes_up=r.bytes_up)]

    def run(self, fg, local=None, *, seeds=None, device="auto", progress=True, local_logits=None,
            train_config=None) -> pd.DataFrame:
        """One round of the hooks per variant, on ``fg`` (clients and complete graph)."""
        from pace_nb.nn.training import TrainConfig

        rows: list[dict[str, Any]] = []
        for v in _variants(self.cfg.variants):
            one = Spear(T=self.cfg.T, a=self.cfg.a, gamma=self.cfg.gamma, variants=(v,))
            rnd = Round(PublicView.of(fg), -1, train_config or TrainConfig())
            ups = [one.client_upload(rnd, c).data for c in fg.clients]
            state = one.server_aggregate(rnd, list(enumerate(ups))).state
            rows += one.graph_rows(rnd, state, fg, [len(u) for u in ups], 0.0, 0.0)
        return pd.DataFrame(rows).reset_index(drop=True)
