"""ONE federated mechanism for every collaborative baseline (PACE §4 matched controls, SPEAR's
multi-round comparisons), in the style of Flower strategies.

A method is a :class:`FederatedMethod` with hooks; the shared driver :func:`train_federated`
runs, for ``r = 1..R`` rounds:

1. **local phase** — every client × seed model trains ``local_epochs`` full-batch epochs from
   its start model, all as ONE batch of the batched trainer (:func:`pace_nb.nn.training.train_models`)
   with the method's extra loss :meth:`FederatedMethod.local_loss`. When the method's local
   objective is plain cross-entropy (:meth:`FederatedMethod.plain_local`) and matched
   :class:`~pace_nb.nn.training.LocalModels` are given, round 1 reuses them (bit-identical).
   Each client's Adam is created once and keeps its moments and step count across rounds, only
   its weights are replaced by the returned model (OpenFGL); ``optimizer_state="restart"`` (a
   hyperparameter of every method) starts a fresh Adam every round instead;
2. **upload** — :meth:`FederatedMethod.upload`: statistics a client sends beside its model;
3. **server** — :meth:`FederatedMethod.aggregate` → one returned Params per receiver;
4. **return** — :meth:`FederatedMethod.deployed`: the model a receiver evaluates (e.g. FedPub's
   eval-mode mask pruning); the next round starts from :meth:`FederatedMethod.next_start`.

``R = 1`` with 100 local epochs is PACE's matched one-round control: same partition, masks,
W0, architecture and local budget; one upload, one aggregation, one return, no post-return
training. Per-seed tensors use the seed-major batch order ``b = s * K + k``.
"""
from __future__ import annotations

import dataclasses
import time
from functools import partial
from dataclasses import dataclass, field
from typing import Any, ClassVar
from collections.abc import Sequence

import torch
from torch import Tensor

from pace_nb.core.config import PAPER_SEEDS, model_seed, progress as _progress, resolve_device
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import Interval, Is, check_param, check_seeds
from pace_nb.methods.contract import Method, make
from pace_nb.methods.registry import check_method_params
from pace_nb.data.federation import FederatedGraph
from pace_nb.nn.gcn import WEIGHT_KEYS, Params, init_params, stack_params
from pace_nb.nn.training import LocalModels, TrainConfig, TrainStep, shared_layouts, train_models
from pace_nb.methods.baselines.runs import FederatedRun, evaluate_run
from pace_nb.methods.baselines.aggregation import (broadcast, mix, nbytes, per_seed, size_weights,  # noqa: F401 (re-exported)
                                                   weighted_mean)

# ----------------------------------------------------------------------------- context


@dataclass
class FedContext:
    """Everything a hook may read: the federation, seeds, round, and method state.

    ``state`` persists across rounds (server optimizer moments, prototypes, previous local
    models …); ``start`` is the batched model every client started the current round from.
    """

    fg: FederatedGraph
    seeds: tuple[int, ...]
    config: TrainConfig
    rounds: int
    device: torch.device
    init: list[Params]
    round: int = 0
    start: Params | None = None
    state: dict[Any, Any] = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return self.fg.num_clients

    @property
    def num_seeds(self) -> int:
        return len(self.seeds)

    _rows: dict = field(default_factory=dict, repr=False, compare=False)  # start_rows' one cached gather

    def start_rows(self, models: Sequence[int], keys: Sequence[str], device) -> Params:
        """``start[k][models]`` on ``device`` for ``keys``: gathered once per round and chunk of models
        (a hook calls it every epoch; the values are the same tensors' rows, so results are unchanged)."""
        key = (self.round, tuple(models), tuple(keys), str(device))
        assert self.start is not None, "start_rows is called during a round"
        if key not in self._rows:
            self._rows.clear()
            self._rows[key] = {k: self.start[k][list(models)].to(device) for k in keys}
        return self._rows[key]

    @property
    def num_models(self) -> int:
        return self.num_seeds * self.num_clients

    @property
    def client_of(self) -> list[int]:
        return [k for _ in self.seeds for k in range(self.num_clients)]

    @property
    def sizes(self) -> Tensor:
        """Client sizes = number of nodes of each client subgraph (OpenFGL ``num_samples``)."""
        return torch.tensor([c.num_nodes for c in self.fg.clients], dtype=torch.float64)

    @property
    def train_sizes(self) -> Tensor:
        return torch.tensor([int(c.train_mask.sum()) for c in self.fg.clients], dtype=torch.float64)

    def seed_index(self, b: int) -> int:
        return int(b) // self.num_clients

    def view(self, t: Tensor) -> Tensor:
        return per_seed(t, self.num_seeds, self.num_clients)


# ----------------------------------------------------------------------------- the mechanism


def check_rounds(rounds: Any, local_epochs: Any, owner: str = "federated training") -> None:
    """``rounds`` an integer >= 1; ``local_epochs`` None (the default budget) or an integer >= 1."""
    check_param(owner, "rounds", rounds, [Interval(int, 1, None)])
    check_param(owner, "local_epochs", local_epochs, [Is(type(None)), Interval(int, 1, None)])


#: Local Adam across rounds: kept (OpenFGL, the default) or restarted every round.
OPTIMIZER_STATES: tuple[str, ...] = ("keep", "restart")


def make_method(name: str, **hyperparameters) -> FederatedMethod:
    """A configured baseline (:func:`pace_nb.methods.contract.make` of a :class:`FederatedMethod`)."""
    return make(name, FederatedMethod, **hyperparameters)  # type: ignore[return-value]


class FederatedMethod(Method):
    """The R-round model-exchange mechanism (a :class:`~pace_nb.methods.contract.Method`):
    FedAvg-shaped defaults for every hook. Subclasses set ``name``/``label``/``paper``/``colour``/
    ``marker``, declare hyperparameters in a frozen dataclass ``Config`` (paper defaults) with
    checks declared on each field (``param``), and override only the hooks that differ."""

    evaluation = "receivers"  # in the protocol each receiver scores its deployed model (the comparison: compare.py)
    personalized: ClassVar[bool] = False
    #: Params keys the server aggregates (others stay with their client).
    #: (a method whose Config changes them sets them in ``validate``, e.g. FedPub's head layers).
    shared_keys: tuple[str, ...] = WEIGHT_KEYS

    #: ``eval_forward(params, client) -> logits``: a method whose deployed model is not the plain
    #: GCN (FedAux's ``[h ‖ z]`` classifier) defines it; None = :func:`gcn_forward`.
    eval_forward: ClassVar[Any] = None

    def __init__(self, **hyper):
        state = hyper.pop("optimizer_state", "keep")
        if state not in OPTIMIZER_STATES:
            raise ConfigError(f"{self.name}: parameter 'optimizer_state' must be one of {', '.join(OPTIMIZER_STATES)}, "
                              f"got {state!r}")
        #: ``"keep"``: each client's local Adam keeps its moments and step count across rounds (OpenFGL
        #: creates it once; only the weights are replaced by the returned model); ``"restart"``: a
        #: fresh Adam every round.
        self.optimizer_state = state
        super().__init__(**hyper)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Validate ``run_method`` hyperparameters (rounds, local_epochs and the :attr:`Config` fields)."""
        check_rounds(params.get("rounds", 1), params.get("local_epochs"), cls.name)
        cls(**{k: v for k, v in params.items() if k not in ("rounds", "local_epochs")})

    @classmethod
    def run_method(cls, fg, local, *, seeds=None, device="auto", progress: bool = True, local_logits=None,
                   train_config=None, rounds: int = 1, local_epochs: int | None = None, optimizer_state: str = "keep",
                   **params):
        """The protocol entry (:mod:`pace_nb.methods.protocol`): train R rounds and evaluate
        native and +CNLL rows; an unknown hyperparameter is a :class:`ConfigError`."""
        check_method_params(cls.name, {**params, "rounds": rounds, "local_epochs": local_epochs,
                                       "optimizer_state": optimizer_state})
        method = cls(optimizer_state=optimizer_state, **params)
        config = train_config or TrainConfig()
        seeds = tuple(local.seeds) if seeds is None else tuple(int(s) for s in seeds)
        if local is None or tuple(local.seeds) != seeds:
            from pace_nb.nn.training import train_local

            local = train_local(fg, seeds, config, device=device, progress=progress)
            local_logits = None
        fed = train_federated(fg, method, rounds, local_epochs, seeds, config=config, local=local, device=device,
                              progress=progress)
        return evaluate_run(fg, fed, local, local_logits=local_logits)

    # -- hooks --------------------------------------------------------------------------
    def prepare(self, ctx: FedContext) -> None:
        """Once, before round 1: precompute per-client statistics (e.g. FedTAD's reliability)."""

    def start_models(self, ctx: FedContext, start: Params) -> Params:
        """Round-1 start models from W0 (batched): add method-specific keys (masks, aux)."""
        return start

    def plain_local(self, ctx: FedContext) -> bool:
        """True when this round's local objective is plain CE (then Local models are reusable)."""
        return type(self).local_loss is FederatedMethod.local_loss and not self.proximal(ctx)

    def proximal(self, ctx: FedContext) -> float:
        """μ of a proximal term ``μ/2 ‖θ − θ_start‖²`` over :attr:`shared_keys` in this round's local
        objective (0 = none; FedProx): the trainer adds its gradient ``μ (θ − θ_start)`` to CE's."""
        return 0.0

    def local_optimizer(self, ctx: FedContext) -> dict | None:
        """Local optimizer spec for the trainer (None = Adam, as Local; e.g. FedNova-SGD's momentum SGD)."""
        return None

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor | None:
        """Extra loss terms of the local objective, SUMMED over the step's models (the trainer
        sums per-model CE, so each model keeps its solo gradient); ``step.by_client()`` groups a
        client's models (one graph, one label set) for one stacked [S, n, d] loss (FedRCL, FedAux)."""
        return None

    def upload(self, ctx: FedContext, trained: Params) -> dict[str, Any]:
        """Statistics each client sends beside its model (leading axis S*K)."""
        return {}

    def aggregate(self, ctx: FedContext, trained: Params, stats: dict[str, Any]) -> Params:
        """Server rule → batched per-receiver Params [S*K]. Default: FedAvg (one global model per seed,
        the same tensor values for every receiver)."""
        glob = weighted_mean(trained, size_weights(ctx.sizes), ctx.num_seeds, ctx.num_clients, self.shared_keys)
        return self.with_private(ctx, broadcast(glob, ctx.num_seeds, ctx.num_clients), trained)

    def deployed(self, ctx: FedContext, returned: Params) -> Params:
        """The model a receiver evaluates (eval-mode transformation of the returned model)."""
        return returned

    def next_start(self, ctx: FedContext, returned: Params, trained: Params) -> Params:
        """Start models of the next round's local phase."""
        return returned

    def after_round(self, ctx: FedContext, trained: Params, returned: Params) -> None:
        """Bookkeeping at the end of a round (e.g. MOON keeps the previous local models)."""

    def diagnostics(self, ctx: FedContext) -> dict[str, Any]:
        """JSON-able readings recorded in the run's params (e.g. FedPub's similarity diagonal)."""
        return {}

    # -- helpers ------------------------------------------------------------------------
    def with_private(self, ctx: FedContext, shared: Params, trained: Params) -> Params:
        """Returned Params = aggregated shared keys + each receiver's own private keys."""
        out = dict(shared)
        for k, v in trained.items():
            if k not in out:
                out[k] = v.clone()
        return out

    def upload_bytes(self, ctx: FedContext, trained: Params, stats: dict[str, Any]) -> list[int]:
        """Dense float32 bytes each client uploads (shared model keys + statistics)."""
        per_model = sum(4 * int(trained[k][0].numel()) for k in self.shared_keys if k in trained)
        extra = [0] * ctx.num_clients
        for v in stats.values():
            if isinstance(v, Tensor) and v.dim() >= 1 and v.shape[0] == ctx.num_models:
                for k in range(ctx.num_clients):
                    extra[k] += 4 * int(v[k].numel())
        return [per_model + e for e in extra]



# ----------------------------------------------------------------------------- driver


def _extra_loss(method: FederatedMethod, ctx: FedContext, step: TrainStep) -> Tensor:
    """The trainer's ``extra_loss``: the method's local terms (a method that is not plain CE has some)."""
    loss = method.local_loss(step, ctx)
    if loss is None:
        raise ConfigError(f"{method.name}: local_loss returned None although plain_local is False")
    return loss


def round_model_seed(run_seed: int, client: int, rnd: int) -> int:
    """Dropout seed of model (seed, client) in round ``rnd`` (round 0 = Local's seed)."""
    base = model_seed(run_seed, client)
    return base if rnd == 0 else (base + 1_000_000_007 * int(rnd)) % (2**63 - 1)


def _reusable(local: LocalModels | None, fg: FederatedGraph, seeds, config: TrainConfig) -> bool:
    return (local is not None and tuple(local.seeds) == tuple(seeds) and local.num_clients == fg.num_clients
            and local.config == config)


def train_federated(fg: FederatedGraph, method: FederatedMethod | str, rounds: int = 1,
                    local_epochs: int | None = None, seeds: Sequence[int] = PAPER_SEEDS, *,
                    config: TrainConfig = TrainConfig(), local: LocalModels | None = None,
                    device="auto", progress: bool = True, max_batch: int | None = None,
                    method_params: dict | None = None) -> FederatedRun:
    """Run ``rounds`` rounds of ``method`` and return the per-receiver models.

    ``local_epochs`` defaults to ``config.epochs`` (100) for one round and 3 per round when
    ``rounds > 1``. ``local`` (matched Local models) lets plain-CE methods skip round-1 training.
    """

    if isinstance(method, str):
        method = make_method(method, **(method_params or {}))
    elif method_params:
        raise ConfigError("method_params only applies when the method is given by name")
    check_rounds(rounds, local_epochs, method.name)
    seeds = check_seeds(seeds)
    if local_epochs is None:
        local_epochs = config.epochs if rounds == 1 else 3
    rconf = dataclasses.replace(config, epochs=int(local_epochs))
    dev = resolve_device(device)
    k_n = fg.num_clients
    w0 = [init_params(fg.num_features, fg.num_classes, rconf.hidden, s) for s in seeds]
    ctx = FedContext(fg=fg, seeds=seeds, config=rconf, rounds=int(rounds), device=dev, init=w0)
    t0 = time.perf_counter()
    method.prepare(ctx)
    start = method.start_models(ctx, stack_params([w for w in w0 for _ in range(k_n)]))
    keep = method.optimizer_state == "keep" and int(rounds) > 1
    # a reused Local model carries no Adam state, so a kept Adam trains round 1 itself (same numbers)
    reuse = _reusable(local, fg, seeds, rconf) and not keep
    bar = _progress(range(int(rounds)), progress and rounds > 1, desc=f"{method.name} rounds")
    history: list[dict[str, Any]] = []
    layouts = shared_layouts(fg.clients)  # the clients' layouts, built once for all rounds and shared with Local
    adam: dict | None = {} if keep else None  # model b -> its Adam moments and step count, across rounds
    for r in bar:
        ctx.round, ctx.start = r, start
        opt = method.local_optimizer(ctx)
        if r == 0 and reuse and method.plain_local(ctx) and opt is None and set(start) == set(WEIGHT_KEYS):
            assert local is not None  # _reusable checked it
            trained = {k: v.clone() for k, v in local.params.items()}
        else:
            mseeds = [round_model_seed(s, k, r) for s in seeds for k in range(k_n)]
            own_loss = type(method).local_loss is not FederatedMethod.local_loss
            hook = partial(_extra_loss, method, ctx) if own_loss and not method.plain_local(ctx) else None
            mu = method.proximal(ctx)
            trained, _ = train_models(fg.clients, start, mseeds, ctx.client_of, rconf, extra_loss=hook,
                                      device=dev, progress=progress and rounds == 1, max_batch=max_batch,
                                      optimizer=opt, layouts=layouts, optimizer_state=adam,
                                      proximal=(mu, {k: start[k] for k in method.shared_keys}) if mu else None)
        stats = method.upload(ctx, trained)
        returned = method.aggregate(ctx, trained, stats)
        method.after_round(ctx, trained, returned)
        start = method.next_start(ctx, returned, trained)
        history.append({"round": r + 1, "seconds": time.perf_counter() - t0})
    deployed = {k: v.detach().cpu() for k, v in method.deployed(ctx, returned).items()}
    up = method.upload_bytes(ctx, trained, stats)
    down = [sum(4 * int(deployed[k][0].numel()) for k in method.shared_keys if k in deployed)] * k_n
    return FederatedRun(method=method.name, seeds=seeds, num_clients=k_n, rounds=int(rounds),
                        local_epochs=int(local_epochs), returned=deployed,
                        trained={k: v.detach().cpu() for k, v in trained.items()},
                        bytes_up=[int(rounds) * b for b in up], bytes_down=[int(rounds) * b for b in down],
                        seconds=time.perf_counter() - t0,
                        params={"method": method.name, "rounds": int(rounds), "local_epochs": int(local_epochs),
                                **({"optimizer_state": method.optimizer_state} if int(rounds) > 1 else {}),
                                **method.hyperparameters(), **method.diagnostics(ctx)},
                        history=history, forward=method.eval_forward)


def run_federated(fg: FederatedGraph, method: FederatedMethod | str, seeds: Sequence[int] = PAPER_SEEDS,
                  rounds: int = 1, local_epochs: int | None = None, *, config: TrainConfig = TrainConfig(),
                  local: LocalModels | None = None, device="auto", progress: bool = True,
                  method_params: dict | None = None, variants=("native", "cnll")) -> list[dict[str, Any]]:
    """Train (:func:`train_federated`) and evaluate (:func:`evaluate_run`) one method: native
    and +CNLL rows for every seed × receiver plus pooled rows. Local models (for CNLL) are
    trained with :func:`pace_nb.nn.training.train_local` unless given."""
    from pace_nb.nn.training import train_local

    seeds = tuple(int(s) for s in seeds)
    if local is None:
        local = train_local(fg, seeds, config, device=device, progress=progress)
    run = train_federated(fg, method, rounds, local_epochs, seeds, config=config, local=local, device=device,
                          progress=progress, method_params=method_params)
    return evaluate_run(fg, run, local, variants=variants)
