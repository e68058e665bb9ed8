"""ONE one-shot mechanism for SPEAR's five one-shot FGL baselines (DENSE, FedCVAE, FedSD2C,
GHOST, OASIS), in the style of :mod:`pace_nb.methods.baselines.base`.

A method is a :class:`OneShotMethod` with three hooks, run per run seed by :func:`run_oneshot`
(in process) and by its round hooks (:class:`~pace_nb.methods.contract.OneRoundMethod`, on Flower):

1. **client phase** — :meth:`OneShotMethod.client_message`: client k's upload from its own
   subgraph (a trained generator, a condensed graph, a codebook, label counts …) as float32
   tensors, serialized in PACE's wire format (:func:`encode`); ``bytes_up[k] = len(message)``.
   A client without training nodes sends nothing;
2. **server phase** — the bytes parsed (:func:`decode`), :meth:`OneShotMethod.synthesize` makes a
   synthetic graph and :meth:`OneShotMethod.server_train` trains the global 2-layer GCN (default:
   cross-entropy on it, :func:`fit_gcn`);
3. **evaluation** — SPEAR's protocol: the global model on the complete graph, accuracy over the
   union of the clients' test masks (:func:`complete_graph_scores`); nothing is sent back.

Wall time of each phase is recorded (``client_seconds`` = sum over clients, ``server_seconds``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.config import PAPER_SEEDS, model_seed, progress as _progress, resolve_device
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import check_seeds
from pace_nb.data.federation import ClientGraph, FederatedGraph
from pace_nb.methods import metrics
from pace_nb.methods.evaluation import federation_fields, make_row
from pace_nb.methods.pace.lowrank import dense_carriers, deserialize, reconstruct, serialize
from pace_nb.methods.contract import OneRoundMethod
from pace_nb.methods.phases import Failure, PublicView, Round, ServerResult, Upload, UploadSpec, split_uploads
from pace_nb.nn.gcn import Params, gcn_forward, init_params, num_params_bytes, propagation_matrix
from pace_nb.nn.training import TrainConfig

Message = dict[str, Tensor]
#: An upload's declared tensors: name → shape (:meth:`OneShotMethod.upload_shapes`); a tuple of
#: them when a real client sends one of several layouts.
Shape = tuple[int | str | None, ...]
Layout = dict[str, Shape] | tuple[dict[str, Shape], ...]


# ----------------------------------------------------------------------------- pure helpers
@dataclass
class SyntheticGraph:
    """Server-side training graph: features ``x [n, F]``, labels ``y [n]``, ``edge_index [2, e]``."""

    x: Tensor
    y: Tensor
    edge_index: Tensor

    def __post_init__(self):
        if self.x.dim() != 2 or self.y.shape != (self.x.shape[0],):
            raise ConfigError(f"synthetic graph: x [n, F] and y [n] needed, got {tuple(self.x.shape)}, {tuple(self.y.shape)}")


def knn_graph(x: Tensor, k: int, groups: Tensor | None = None) -> Tensor:
    """Symmetric cosine kNN graph [2, e] (no self loops); with ``groups`` only within a group."""
    n = x.shape[0]
    if n < 2 or k < 1:
        return torch.empty(2, 0, dtype=torch.long, device=x.device)
    z = F.normalize(x.float(), dim=1)
    sim = z @ z.T
    sim.fill_diagonal_(float("-inf"))
    if groups is not None:
        sim = sim.masked_fill(groups.view(-1, 1) != groups.view(1, -1), float("-inf"))
    kk = min(int(k), n - 1)
    val, idx = sim.topk(kk, dim=1)
    src = torch.arange(n, device=x.device).repeat_interleave(kk)
    keep = torch.isfinite(val.reshape(-1))
    ei = torch.stack([src[keep], idx.reshape(-1)[keep]])
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    flat = torch.unique(ei[0] * n + ei[1])  # sorted, duplicates merged
    return torch.stack([flat // n, flat % n])


def propagate_features(x: Tensor, edge_index: Tensor, steps: int = 2) -> Tensor:
    """``P^steps X`` with the GCN propagation ``P = D^-1/2 (A + I) D^-1/2`` (SGC features)."""
    P = propagation_matrix(edge_index, x.shape[0])
    out = x.float()
    for _ in range(int(steps)):
        out = torch.sparse.mm(P, out)
    return out


def label_counts(client: ClientGraph, num_classes: int) -> Tensor:
    """Training-label counts ``n_{k,c}`` [C] (float32, for the wire)."""
    return torch.bincount(client.y[client.train_mask].long(), minlength=num_classes).float()


def allocate(counts: Tensor, total: int) -> Tensor:
    """Integer split of ``total`` proportional to ``counts`` (largest remainders; ≥ 1 per nonzero count)."""
    counts = counts.double().clamp_min(0)
    if float(counts.sum()) <= 0:
        return torch.zeros_like(counts, dtype=torch.long)
    raw = counts / counts.sum() * int(total)
    out = raw.floor().long()
    rest = int(total) - int(out.sum())
    if rest > 0:
        out[torch.argsort(raw - out.double(), descending=True)[:rest]] += 1
    return torch.where(counts > 0, out.clamp_min(1), torch.zeros_like(out))


def fit_gcn(params: Params, x: Tensor, edge_index: Tensor, loss_fn: Callable[[Tensor, Params], Tensor], *,
            epochs: int, lr: float, weight_decay: float, dropout: float, seed: int) -> Params:
    """Full-batch Adam on ``loss_fn(logits, params)`` of a 2-layer GCN (the shared server routine)."""
    theta = {k: v.detach().clone().float().requires_grad_(True) for k, v in params.items()}
    if epochs <= 0 or x.shape[0] == 0:
        return {k: v.detach() for k, v in theta.items()}
    P = propagation_matrix(edge_index, x.shape[0])
    opt = torch.optim.Adam(list(theta.values()), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(int(seed))
    for _ in range(int(epochs)):
        opt.zero_grad()
        logits = gcn_forward(theta, x, P, dropout=dropout, training=True, generator=gen)
        loss_fn(logits, theta).backward()
        opt.step()
    return {k: v.detach() for k, v in theta.items()}


def mlp(sizes: Sequence[int], seed: int) -> torch.nn.Sequential:
    """``Linear–ReLU–…–Linear`` with PyTorch's default init drawn from ``seed`` (global RNG untouched)."""
    layers: list[torch.nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(torch.nn.Linear(int(a), int(b)))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def adam_steps(parameters, closure: Callable[[], Tensor], steps: int, lr: float, weight_decay: float = 0.0) -> None:
    """``steps`` full-batch Adam steps on ``closure()`` (a loss); nothing when ``steps = 0``."""
    parameters = list(parameters)
    if steps <= 0:
        return
    opt = torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay)
    for _ in range(int(steps)):
        opt.zero_grad()
        closure().backward()
        opt.step()


def module_message(prefix: str, module: torch.nn.Module) -> Message:
    """A module's parameters as upload tensors ``{prefix.name: tensor}``."""
    return {f"{prefix}.{k}": v.detach().clone() for k, v in module.state_dict().items()}


def module_shapes(prefix: str, module: torch.nn.Module) -> dict[str, Shape]:
    """The upload shapes of :func:`module_message` for ``module``: ``{prefix.name: shape}``."""
    return {f"{prefix}.{k}": tuple(v.shape) for k, v in module.state_dict().items()}


def gcn_shapes(prefix: str, num_features: int, num_classes: int, hidden: int | None) -> dict[str, Shape]:
    """The upload shapes of a 2-layer GCN's weights (:data:`~pace_nb.nn.gcn.WEIGHT_KEYS`, PyG layout)
    under ``prefix``; ``hidden`` ``None``: any width, the same in every layer."""
    h: int | str = "hidden" if hidden is None else int(hidden)
    shapes: dict[str, Shape] = {"conv1.weight": (h, num_features), "conv1.bias": (h,),
                                "conv2.weight": (num_classes, h), "conv2.bias": (num_classes,)}
    return {f"{prefix}.{k}": v for k, v in shapes.items()}


M = TypeVar("M", bound=torch.nn.Module)


def load_module(prefix: str, module: M, message: Message) -> M:
    """Load ``{prefix.name: tensor}`` from a parsed message into ``module`` (shapes checked by torch)."""
    state = {k[len(prefix) + 1:]: v for k, v in message.items() if k.startswith(prefix + ".")}
    module.load_state_dict(state)
    return module


def is_binary(x: Tensor) -> bool:
    """True when every feature is 0 or 1 (bag-of-words graphs: Cora, CiteSeer, Computers, CS)."""
    return bool(((x == 0) | (x == 1)).all())


@torch.no_grad()
def complete_graph_scores(fg: FederatedGraph, params: Params) -> dict[str, float]:
    """SPEAR's evaluation: the global GCN on the complete graph, over ``fg.global_mask("test")`` (fractions)."""
    d = fg.data
    logits = gcn_forward(params, d.x.float(), propagation_matrix(d.edge_index, int(d.num_nodes)))
    mask = fg.global_mask("test")
    out = metrics.scores(d.y.view(-1)[mask], logits.argmax(1)[mask], fg.num_classes)
    out["n_test"] = int(mask.sum())
    return out


def encode(message: Message) -> bytes:
    """A client's upload as real bytes (PACE wire format, float32 payload)."""
    return serialize(dense_carriers({k: v.detach().float().contiguous() for k, v in message.items()}))


def decode(blob: bytes) -> Message:
    """The server's view of an upload: tensors parsed from the bytes alone."""
    return reconstruct(deserialize(blob))


# ----------------------------------------------------------------------------- context


@dataclass
class OneShotContext:
    """What a hook may read: the federation's :class:`~pace_nb.methods.phases.PublicView` (a
    ``FederatedGraph`` given here is reduced to it: no hook reads the data through the context,
    in process as on Flower), the run seed, training config, device, the client's matched Local
    model (``local[k]``, when the protocol trained them) and, in the server phase, who sent the
    messages (``senders``, aligned with them) and who did not (``failures``)."""

    view: PublicView
    seed: int
    config: TrainConfig
    device: torch.device
    local: list[Params] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    senders: tuple[int, ...] = ()
    failures: tuple[Failure, ...] = ()

    def __post_init__(self) -> None:
        self.view = PublicView.of(self.view)

    @property
    def num_classes(self) -> int:
        return self.view.num_classes

    @property
    def num_features(self) -> int:
        return self.view.num_features

    def generator(self, k: int, salt: int = 0) -> torch.Generator:
        """Deterministic generator of client ``k`` (``k = -1``: the server) for this run seed."""
        return torch.Generator().manual_seed((model_seed(self.seed, k + 1) + 7_777 * salt) % (2**63 - 1))

    def init_model(self) -> Params:
        """W0 of the global GCN (the run seed's shared initialization)."""
        return init_params(self.num_features, self.num_classes, self.config.hidden, self.seed)

    def fit(self, graph: SyntheticGraph, epochs: int | None = None, params: Params | None = None,
            loss_fn: Callable[[Tensor, Params], Tensor] | None = None, salt: int = 0) -> Params:
        """Train a GCN on a synthetic graph with the shared config (default: CE on every node)."""
        cfg = self.config
        fn = loss_fn or (lambda z, _th: F.cross_entropy(z, graph.y.long()))
        return fit_gcn(params or self.init_model(), graph.x, graph.edge_index, fn,
                       epochs=cfg.epochs if epochs is None else int(epochs), lr=cfg.lr,
                       weight_decay=cfg.weight_decay, dropout=cfg.dropout, seed=model_seed(self.seed, 10_000 + salt))


# ----------------------------------------------------------------------------- the mechanism


class OneShotMethod(OneRoundMethod):
    """The one-upload mechanism (a :class:`~pace_nb.methods.contract.OneRoundMethod` whose round hooks
    are :func:`client_phase`, :func:`server_phase` and :func:`oneshot_row`). Subclasses set
    ``name``/``label``/``paper``/``colour``/``marker``, a frozen ``Config`` with the original
    paper's (or code's) defaults and checks on each field (``param``), and the hooks."""

    evaluation = "complete_graph"  # SPEAR's protocol: the server's global model on the complete graph
    #: True when the client's upload is built from its matched Local model (DENSE).
    uses_local: ClassVar[bool] = False
    #: The largest magnitude of any value of a real client's upload (model weights, features,
    #: counts of a graph's nodes): a server refuses an upload beyond it before its server phase.
    max_upload_value: ClassVar[float] = 1e6
    partition = "dirichlet"  # SPEAR's protocol: Dirichlet label skew

    @classmethod
    def requires(cls) -> tuple[str, ...]:
        return ("local",) if cls.uses_local else ()

    def upload_shapes(self, num_features: int, num_classes: int, hidden: int | None = None) -> Layout | None:
        """The tensors of a real client's :meth:`client_message` from the public facts and the GCN
        width ``hidden`` (``None``: any), as :class:`~pace_nb.methods.phases.UploadSpec`'s ``shapes``;
        ``None`` when the method declares none (a server then compares its uploads with the majority's)."""
        return None

    @property
    def variant(self) -> str:
        """The rows' ``variant``: "native" (the method as published) unless a subclass's
        parameters select a variant of it (FedSD2C's core-set-only ``mode``)."""
        return "native"

    # -- hooks ------------------------------------------------------------------------------
    def client_message(self, ctx: OneShotContext, k: int, client: ClientGraph) -> Message:
        """Tensors client ``k`` uploads (built from its own subgraph only)."""
        raise NotImplementedError

    def synthesize(self, ctx: OneShotContext, messages: list[Message]) -> SyntheticGraph | None:
        """Server: messages (from clients ``ctx.senders``; ``ctx.failures`` sent none) → a synthetic
        training graph (``None`` when the method trains otherwise)."""
        raise NotImplementedError

    def server_train(self, ctx: OneShotContext, messages: list[Message], graph: SyntheticGraph | None) -> Params:
        """Server: the global GCN (default: cross-entropy on the synthetic graph)."""
        if graph is None:
            raise NotImplementedError(f"{self.name}: synthesize returned no graph, so server_train must be overridden")
        return ctx.fit(graph)

    def diagnostics(self, ctx: OneShotContext, fg: FederatedGraph) -> dict[str, Any]:
        """Evaluation: JSON-able readings recorded in the row's params after the server phase, on the
        evaluation graph ``fg`` (the complete graph the global model is scored on; default: none)."""
        return {}

    # -- the round hooks (OneRoundMethod), over the three above -----------------------------------
    def client_upload(self, rnd: Round, client: ClientGraph, local: Params | None = None) -> Upload:
        models: list[Any] | None = [local if k == client.index else None for k in range(rnd.view.num_clients)]
        ctx = OneShotContext(rnd.view, rnd.seed, rnd.config, resolve_device(rnd.device), models if self.uses_local else None)
        return Upload(client_phase(self, ctx, client.index, client))

    def upload_spec(self, config: TrainConfig, view: PublicView | None, client: int) -> UploadSpec:
        shapes = self.upload_shapes(view.num_features, view.num_classes, config.hidden) if view is not None else None
        return UploadSpec("carriers", shapes=shapes, bounds=self.max_upload_value, empty_ok=True)

    def server_aggregate(self, rnd: Round, uploads: Sequence[tuple[int, bytes]],
                         failures: Sequence[Failure] = ()) -> ServerResult:
        ctx = OneShotContext(rnd.view, rnd.seed, rnd.config, resolve_device(rnd.device))
        return ServerResult(state=(ctx, *server_phase(self, ctx, uploads, failures)))

    def graph_rows(self, rnd: Round, state: Any, graph: Any, up: Sequence[int], client_seconds: float,
                   server_seconds: float) -> list[dict[str, Any]]:
        ctx, theta, synthetic = state
        return [oneshot_row(graph, self, ctx, theta, synthetic, up, client_seconds, server_seconds)]

    # -- protocol entry -----------------------------------------------------------------------
    def run(self, fg, local, *, seeds=None, device="auto", progress: bool = True, local_logits=None,
            train_config=None):
        """The protocol entry (:meth:`Method.run_method` checks the hyperparameters first)."""
        seeds = tuple(local.seeds) if seeds is None and local is not None else (seeds or PAPER_SEEDS[:1])
        return run_oneshot(fg, self, seeds, config=train_config or TrainConfig(), local=local, device=device,
                           progress=progress)


def run_oneshot(fg: FederatedGraph, method: OneShotMethod, seeds: Sequence[int] = PAPER_SEEDS[:1], *,
                config: TrainConfig = TrainConfig(), local=None, device="auto", progress: bool = True,
                row_seed: int | None = None) -> list[dict[str, Any]]:
    """Run ``method`` once per run seed; one pooled row (``receiver = -1``) per seed.

    ``local``: matched :class:`~pace_nb.nn.training.LocalModels` (needed by ``uses_local``
    methods; trained here when absent). ``row_seed`` overrides the rows' ``seed`` column (the
    SPEAR comparison stores the data seed there; the run seed is ``run_seed``, and in ``params``).
    """
    seeds = check_seeds(seeds)
    dev = resolve_device(device)
    if method.uses_local and (local is None or tuple(local.seeds) != tuple(seeds) or local.config != config):
        from pace_nb.nn.training import train_local

        local = train_local(fg, seeds, config, device=device, progress=progress)
    rows = []
    for s, seed in enumerate(_progress(seeds, progress and len(seeds) > 1, desc=f"{method.name} seeds")):
        models = [local.model(s, k) for k in range(fg.num_clients)] if method.uses_local else None
        ctx = OneShotContext(PublicView.of(fg), int(seed), config, dev, models)
        t0 = time.perf_counter()
        blobs = [client_phase(method, ctx, k, c) for k, c in enumerate(fg.clients)]
        t1 = time.perf_counter()
        theta, graph = server_phase(method, ctx, list(enumerate(blobs)))
        t2 = time.perf_counter()
        rows.append(oneshot_row(fg, method, ctx, theta, graph, [len(b) for b in blobs], t1 - t0, t2 - t1,
                                row_seed=row_seed))
    return rows


# ----------------------------------------------------------------------------- the phases (also Flower's)
def client_phase(method: OneShotMethod, ctx: OneShotContext, k: int, client: ClientGraph) -> bytes:
    """Client ``k``'s upload bytes (empty for a client without training nodes)."""
    return encode(method.client_message(ctx, k, client)) if bool(client.train_mask.any()) else b""


def server_phase(method: OneShotMethod, ctx: OneShotContext, uploads: Sequence[tuple[int, bytes]],
                 failures: Sequence[Failure] = ()) -> tuple[Params, SyntheticGraph | None]:
    """The server on the ``(client, upload bytes)`` pairs alone and the ``failures`` (clients that sent
    nothing usable; an empty upload is one) → (global GCN, synthetic graph). The hooks get the
    messages in client order, ``ctx.senders`` naming their clients and ``ctx.failures`` the rest."""
    pairs, ctx.failures = split_uploads(uploads, failures)
    ctx.senders = tuple(k for k, _ in pairs)
    messages = [decode(b) for _, b in pairs]
    graph = method.synthesize(ctx, messages)
    return method.server_train(ctx, messages, graph), graph


def oneshot_row(fg, method: OneShotMethod, ctx: OneShotContext, theta: Params, graph: SyntheticGraph | None,
                up: Sequence[int], client_seconds: float, server_seconds: float,
                row_seed: int | None = None) -> dict[str, Any]:
    """The pooled row of one run seed: the global GCN on ``fg``'s complete graph (:func:`complete_graph_scores`);
    study "comparison", evaluation "complete_graph", ``run_seed`` the run seed, ``seed`` it too unless ``row_seed``."""
    config, seed = ctx.config, ctx.seed
    sc = complete_graph_scores(fg, theta)
    params = {"method": method.name, "run_seed": int(seed), "rounds": 1, "evaluation": "complete_graph",
              "client_seconds": client_seconds, "server_seconds": server_seconds, "bytes_per_client": list(up),
              "synthetic_nodes": int(graph.x.shape[0]) if graph is not None else 0,
              "hidden": config.hidden, "epochs": config.epochs, "lr": config.lr, **method.hyperparameters(),
              **method.diagnostics(ctx, fg)}
    beta = (getattr(fg, "config", {}) or {}).get("beta")
    if beta is not None:
        params["beta"] = beta
    return make_row(**federation_fields(fg), seed=int(seed if row_seed is None else row_seed), run_seed=int(seed),
                    study="comparison", evaluation="complete_graph", method=method.name, variant=method.variant, rank=0, receiver=-1,
                    acc=100 * sc["acc"], f1_weighted=100 * sc["f1_weighted"], f1_macro=100 * sc["f1_macro"],
                    bytes_up=int(sum(up)), bytes_down=0, seconds=client_seconds + server_seconds, n_test=sc["n_test"],
                    upload_ratio=100.0 * (sum(up) / max(1, sum(b > 0 for b in up))) / num_params_bytes(theta),
                    params=params)
