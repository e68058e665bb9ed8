"""The PACE protocol (paper §3, Fig. 2) and its Table 2 / Table 5 variants.

Per run seed, with the shared initialization ``W0`` and Local models ``W_L`` of K clients:

1. **upload** (client i): ``Δ_i = W_L − W0``; carriers ``Δ̄_i = P_r(Δ_i)`` (Eq. 2) and the
   per-layer sketches ``c_i`` (Eq. 4–5), serialized to bytes (:mod:`pace_nb.methods.pace.lowrank`);
2. **server**: parses the K uploads, forms the consensus ``Δ^C`` (Eq. 6–7) and the
   per-receiver return ``Γ̂_i = P_r(Δ^C − Δ̄_i)`` (Eq. 8), serialized to bytes;
3. **receiver**: parses its return, ``W_E = W_L + Γ̂_i`` (Eq. 9) and picks α by CNLL (Eq. 10).

The server works only on what was sent: the parsed float32 messages. Byte counts are the
lengths of those messages; ratios are relative to the dense float32 model bytes.

Variants (Table 2): ``full`` (PACE), ``transport`` (α = 1), ``fixed0.5`` (α = 0.5), ``mean``
(plain average + CNLL; no sketch is uploaded), ``raw`` (raw-activation sketch + CNLL),
``direct`` (receiver gets ``W0 + P_r(Δ^C)`` + CNLL). Rank study (Table 5): any ``rank ≥ 1``,
``rank = 0`` (:data:`~pace_nb.methods.pace.lowrank.DENSE`) is the dense control. Variants that share a transport share its computation;
all share the same Local models (trained once).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal
from collections.abc import Sequence

import pandas as pd
import torch

from pace_nb.methods.pace import lowrank
from pace_nb.core.config import progress as _progress
from pace_nb.core.errors import ConfigError, unknown
from pace_nb.core.validation import Interval, Is, ListOf, Options, check_names, declared, param, validate_params
from pace_nb.methods.evaluation import evaluate_method
from pace_nb.methods.local import seed_positions
from pace_nb.methods.contract import OneRoundMethod, register
from pace_nb.methods.pace.lowrank import RANK, Params, check_ranks
from pace_nb.methods.phases import Failure, PublicView, Receipt, Round, ServerResult, Upload, UploadSpec, split_uploads
from pace_nb.methods.pace.sketch import SketchConfig, client_data, client_sketches
from pace_nb.methods.pace.transport import TransportConfig, external_params, server_returns

EPS = 1e-12
DELTA, SKETCH = "delta/", "sketch/"


@declared
@dataclass(frozen=True)
class PaceConfig:
    """PACE hyperparameters (paper defaults). ``rank = 0`` (:data:`~pace_nb.methods.pace.lowrank.DENSE`)
    → dense carriers (Table 5 "Dense"); ``alpha``: "cnll" or a fixed coefficient in [0, 1]."""

    rank: int = param(6, RANK, help="carrier rank (0 = dense)")
    eps: float = param(EPS, Interval(float, 0.0, 1e-3, closed="right"))
    consensus: Literal["regmean", "mean"] = param("regmean", Options(("regmean", "mean")))
    sketch: Literal["propagated", "raw"] = param("propagated", Options(("propagated", "raw")))
    ret: Literal["correction", "direct"] = param("correction", Options(("correction", "direct")))
    alpha: str | float = param("cnll", Options(("cnll",)), Interval(float, 0.0, 1.0))

    def __post_init__(self) -> None:
        validate_params(self)

    @property
    def transport_config(self) -> TransportConfig:
        return TransportConfig(consensus=self.consensus, ret=self.ret, eps=self.eps)

    @property
    def sketch_config(self) -> SketchConfig:
        return SketchConfig(kind=self.sketch, eps=self.eps)

    @property
    def uses_sketch(self) -> bool:
        return self.consensus == "regmean"

    def transport_key(self) -> tuple:
        """Variants with equal keys share uploads, server and External models."""
        return (self.rank, self.eps, self.consensus, self.sketch if self.uses_sketch else None, self.ret)


#: Table 2 variants as overrides of the default (full PACE) configuration.
VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "transport": {"alpha": 1.0},
    "fixed0.5": {"alpha": 0.5},
    "mean": {"consensus": "mean"},
    "raw": {"sketch": "raw"},
    "direct": {"ret": "direct"},
}


def variant_config(name: str, rank: int = 6, base: PaceConfig | None = None) -> PaceConfig:
    """The :class:`PaceConfig` of a named Table 2 variant at ``rank``."""
    if name not in VARIANTS:
        raise unknown("PACE variant", name, VARIANTS)
    return replace(base or PaceConfig(), rank=int(rank), **VARIANTS[name])


# ----------------------------------------------------------------------------- protocol
def upload(local: Params, init: Params, client, config: PaceConfig = PaceConfig()) -> bytes:
    """Client message: carriers of ``Δ = W_L − W0`` (Eq. 2) + sketches (Eq. 4–5), as bytes."""
    delta = {n: (local[n] - init[n]).detach().cpu().float() for n in init}
    msg = {DELTA + n: c for n, c in lowrank.compress(delta, config.rank).items()}
    if config.uses_sketch:
        prop, x, first = client_data(client, config.sketch_config)  # the data-only part, once per client
        sk = client_sketches({n: v.detach().cpu().float() for n, v in local.items()}, x, prop,
                             client.train_mask, config.sketch_config, known=first)
        msg.update(lowrank.dense_carriers({SKETCH + n: v for n, v in sk.items()}))
    return lowrank.serialize(msg)


#: Adam moves a weight by at most about 3.2·lr per step (β = 0.9, 0.999); ten times that per
#: epoch bounds every entry of ``W_L − W0`` with a wide margin.
ADAM_STEP_BOUND = 10.0


def upload_layout(num_features: int, num_classes: int, hidden: int, config: PaceConfig = PaceConfig()) -> list[list]:
    """The header of every client's :func:`upload` (``[[name, kind, shape, rank], ...]``), from the
    federation's public facts alone: what the server accepts, before it decodes any payload."""
    from pace_nb.nn.gcn import init_params

    w0 = init_params(int(num_features), int(num_classes), int(hidden), 0)
    carriers = {DELTA + n: lowrank.Carrier(shape=tuple(v.shape), left=torch.empty(v.shape[0], r),
                                           right=torch.empty(v.shape[1], r))
                if lowrank.is_eligible(tuple(v.shape), r := config.rank)
                else lowrank.Carrier(shape=tuple(v.shape), dense=v) for n, v in w0.items()}
    if config.uses_sketch:
        from pace_nb.methods.pace.sketch import weight_names

        carriers.update(lowrank.dense_carriers({SKETCH + n: w0[n][0] for n in weight_names(w0)}))
    return lowrank.header_entries(carriers)


def upload_bounds(layout: list[list], epochs: int, lr: float) -> dict[str, list[tuple[float, float]]]:
    """Per carrier of :func:`upload_layout`, the (low, high) every value of each of its wire tensors
    lies in for a real client: ``Δ`` entries within ``ADAM_STEP_BOUND·lr·epochs`` (the left factor
    ``U_r S_r`` within that times ``√(d_out·d_in)``, ≥ σ₁; the right factor ``V_r`` orthonormal,
    within 1); a sketch ``c = m̃ + ε`` (Eq. 5) positive and at most its length + 1 (m̃ ≥ 0 has mean 1)."""
    step = ADAM_STEP_BOUND * float(lr) * int(epochs)
    out = {}
    for name, kind, shape, _ in layout:
        if name.startswith(SKETCH):
            out[name] = [(0.0, shape[0] + 1.0)]
        elif kind == "dense":
            out[name] = [(-step, step)]
        else:
            big = step * (shape[0] * shape[1]) ** 0.5
            out[name] = [(-big, big), (-1.0 - 1e-3, 1.0 + 1e-3)]
    return out


def _split(msg: dict[str, lowrank.Carrier]) -> tuple[Params, Params]:
    deltas = {n[len(DELTA):]: c.reconstruct() for n, c in msg.items() if n.startswith(DELTA)}
    sketches = {n[len(SKETCH):]: c.reconstruct() for n, c in msg.items() if n.startswith(SKETCH)}
    return deltas, sketches


def server(uploads: Sequence[bytes], config: PaceConfig = PaceConfig()) -> list[bytes]:
    """Server: parse the K uploads, consensus (Eq. 6–7), per-receiver returns (Eq. 8) as bytes."""
    parsed = [_split(lowrank.deserialize(u)) for u in uploads]
    names = list(parsed[0][0])
    deltas = {n: torch.stack([p[0][n] for p in parsed]) for n in names}
    sketches = ({n: torch.stack([p[1][n] for p in parsed]) for n in parsed[0][1]}
                if config.uses_sketch else None)
    ret = server_returns(deltas, sketches, config.rank, config.transport_config)
    return [lowrank.serialize(lowrank.unbatch(ret, i)) for i in range(len(uploads))]


def receive(local: Params, init: Params, message: bytes, config: PaceConfig = PaceConfig()) -> Params:
    """Receiver: ``W_E = W_L + Γ̂_i`` (Eq. 9), or ``W0 + P_r(Δ^C)`` for the direct return."""
    returned = lowrank.reconstruct(lowrank.deserialize(message))
    dev = next(iter(local.values())).device
    returned = {n: v.to(dev) for n, v in returned.items()}
    return external_params(local, init, returned, config.ret)


@dataclass
class SeedTransport:
    """One seed's transport outcome: External Params and message sizes per receiver."""

    external: list[Params]
    bytes_up: list[int]
    bytes_down: list[int]
    dense_bytes: int
    seconds: float


def transport_seed(fg, local: Sequence[Params], init: Params, config: PaceConfig = PaceConfig()) -> SeedTransport:
    """Steps 1–3 (without calibration) for the K clients of one seed: PACE's round hooks
    (:meth:`Pace.client_upload`, :meth:`Pace.server_aggregate`) and the receivers' :func:`receive`."""
    t0 = time.perf_counter()
    method = Pace(ranks=(config.rank,), base=config)
    rnd = Round(PublicView.of(fg), -1, _train_config(init), w0=init)
    ups = [method.client_upload(rnd, c, local[i]).data for i, c in enumerate(fg.clients)]
    downs = method.server_aggregate(rnd, list(enumerate(ups))).returns or {}
    ext = [receive(local[i], init, downs[i], config) for i in range(len(local))]
    return SeedTransport(ext, [len(u) for u in ups], [len(downs[i]) for i in range(len(ups))],
                         lowrank.dense_model_bytes(init), time.perf_counter() - t0)


def _train_config(init: Params):
    from pace_nb.nn.training import TrainConfig

    return TrainConfig(hidden=int(init["conv1.weight"].shape[0]))


def variant_configs(variants: Sequence[str], ranks: Sequence[int], base: PaceConfig | None = None
                    ) -> list[tuple[str, PaceConfig]]:
    """``(variant, config)`` for every rank × variant, both lists checked."""
    variants = check_names([variants] if isinstance(variants, str) else variants, "PACE variants")
    ranks = check_ranks([ranks] if isinstance(ranks, int) else ranks, "PACE ranks")
    if base is not None and not isinstance(base, PaceConfig):
        raise ConfigError(f"pace: parameter 'base' must be a PaceConfig or None, got {base!r}")
    return [(v, variant_config(v, r, base)) for r in ranks for v in variants]


@register
class Pace(OneRoundMethod):
    """PACE as a registered method: rows for every seed × ``ranks`` × ``variants`` (Table 2 variants,
    Table 5 ranks; ``base``: the :class:`PaceConfig` the variants start from, None = the paper's)."""

    name = "pace"
    label = "PACE (Ours)"
    paper = "PACE: propagation-aware low-rank correction + CNLL (this package's paper)"
    description = "PACE: rank-r RegMean correction + CNLL (variants, ranks)"
    colour, marker = "#D55E00", "o"
    evaluation = "receivers"
    shared_options = ("variants", "ranks")  # --variants / --rank, a grid's pace_variants / ranks
    one_per_round = ("variants", "ranks")
    ranked = True

    @dataclass(frozen=True)
    class Config:
        variants: Sequence[str] = param(("full",), Is(str), ListOf((Is(str),)), help="Table 2 variants")
        ranks: Sequence[int] = param((6,), RANK, ListOf((RANK,)), help="carrier ranks (0 = dense)")
        base: PaceConfig | None = param(None, Is((PaceConfig, type(None))))

    def validate(self) -> None:
        variant_configs(self.cfg.variants, self.cfg.ranks, self.cfg.base)

    def check_federation(self, fg, train_config) -> None:
        """A rank above the layer width it factorises is impossible: refused before any training."""
        shapes = [(train_config.hidden, fg.num_features), (fg.num_classes, train_config.hidden)]
        check_ranks(self.cfg.ranks if isinstance(self.cfg.ranks, (list, tuple)) else [self.cfg.ranks],
                    "PACE ranks", shapes)

    # -- the round hooks (one variant at one rank) ------------------------------------------------
    def round_variant(self) -> tuple[str, PaceConfig]:
        """``(variant, config)`` of this round: its one variant at its one rank."""
        self.check_round()
        return variant_configs(self.cfg.variants, self.cfg.ranks, self.cfg.base)[0]

    @property
    def pace_config(self) -> PaceConfig:
        return self.round_variant()[1]

    def client_upload(self, rnd: Round, client, local: Params | None = None) -> Upload:
        """Step 1 on ``local`` = W_L; the client keeps W_L (dense float32) for its receive phase."""
        assert local is not None, "PACE's upload is built from the client's Local model"
        return Upload(upload(local, rnd.initial(), client, self.pace_config),
                      lowrank.serialize(lowrank.dense_carriers(local)))

    def upload_spec(self, config, view: PublicView | None, client: int) -> UploadSpec:
        if view is None:
            return UploadSpec("carriers", fixed=True)
        layout = upload_layout(view.num_features, view.num_classes, config.hidden, self.pace_config)
        return UploadSpec("carriers", header=layout, bounds=upload_bounds(layout, config.epochs, config.lr), fixed=True)

    def server_aggregate(self, rnd: Round, uploads: Sequence[tuple[int, bytes]],
                         failures: Sequence[Failure] = ()) -> ServerResult:
        """Step 2 on the non-empty uploads: one return per sender."""
        pairs, _ = split_uploads(uploads, failures)
        returns = server([b for _, b in pairs], self.pace_config)
        return ServerResult(returns=dict(zip([k for k, _ in pairs], returns, strict=True)))

    def receiver_logits(self, rnd: Round, client, kept: bytes | None, returned: bytes) -> Receipt:
        """Step 3: W_E from the kept W_L and the returned bytes; the Local and External logits."""
        from pace_nb.nn.training import client_logits

        if kept is None:
            raise ConfigError("pace receive before upload: this node holds no Local model")
        cfg = self.pace_config
        w_l = lowrank.reconstruct(lowrank.deserialize(kept))
        w_e = receive(w_l, rnd.initial(), returned, cfg)
        return Receipt(client_logits(w_l, client, device=rnd.device), client_logits(w_e, client, device=rnd.device),
                       cfg.alpha if isinstance(cfg.alpha, str) else float(cfg.alpha))

    def receiver_fields(self, rnd: Round) -> dict[str, Any]:
        variant, cfg = self.round_variant()
        return {"variant": variant, "rank": cfg.rank, "dense_bytes": lowrank.dense_model_bytes(rnd.initial()),
                "params": {"pace": asdict(cfg), "train": asdict(rnd.config)}}

    def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
        return run_pace(fg, local, seeds=seeds, device=device, progress=progress, local_logits=local_logits,
                        variants=self.cfg.variants, ranks=self.cfg.ranks, base=self.cfg.base)


def run_pace(fg, local, *, seeds: Sequence[int] | None = None, device="auto", progress: bool = True,
             variants: Sequence[str] = ("full",), ranks: Sequence[int] = (6,),
             base: PaceConfig | None = None, local_logits: dict | None = None, train_config=None) -> pd.DataFrame:
    """PACE rows for every seed × rank × variant, sharing ``local`` (LocalModels).

    ``local_logits`` (optional cache ``{seed_position: [z_L per client]}``) avoids recomputing
    Local logits when several methods run on the same Local models. ``train_config`` is the
    protocol's (``local`` carries the one its models were trained with).
    """
    from pace_nb.nn.training import client_logits

    configs = variant_configs(variants, ranks, base)
    seed_pos = seed_positions(local, seeds)
    rows: list[dict] = []
    k = fg.num_clients
    for s in _progress(seed_pos, progress, desc="PACE seeds"):
        seed = local.seeds[s]
        w_l = [local.model(s, i) for i in range(k)]
        init = local.init[s]
        z_l = (local_logits or {}).get(s) or [client_logits(w_l[i], c, device=device) for i, c in enumerate(fg.clients)]
        groups: dict[tuple, SeedTransport] = {}
        ext_logits: dict[tuple, list] = {}
        for name, cfg in configs:
            key = cfg.transport_key()
            if key not in groups:
                groups[key] = transport_seed(fg, w_l, init, cfg)
                ext_logits[key] = [client_logits(p, c, device=device) for p, c in zip(groups[key].external, fg.clients, strict=True)]
            tr = groups[key]
            t0 = time.perf_counter()
            alpha = cfg.alpha if isinstance(cfg.alpha, str) else float(cfg.alpha)
            out = evaluate_method(
                fg, z_l, ext_logits[key], alpha, seed=seed, method="pace", variant=name, rank=cfg.rank,
                bytes_up=tr.bytes_up, bytes_down=tr.bytes_down, dense_bytes=tr.dense_bytes,
                params={"pace": asdict(cfg), "train": asdict(local.config)})
            for row in out:
                row["seconds"] = tr.seconds + time.perf_counter() - t0
            rows.extend(out)
    return pd.DataFrame(rows)
