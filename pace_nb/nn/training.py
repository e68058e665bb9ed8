"""Local training of many GCNs at once (docs/DESIGN.md §5 "Local", §10 "Speed").

``train_models`` trains B independent 2-layer GCNs (clients × seeds as a batch axis) with
ONE loss = Σ_b mean-CE_b (+ an optional ``extra_loss``) and ONE ``torch.optim.Adam`` step.
Adam and its weight decay are elementwise, so every model follows exactly the trajectory it
would follow alone; dropout masks come from one generator per model, so results do not
depend on how models are grouped into batches (chunks).

Speed (docs/DESIGN.md §10): all models of a chunk share one padded, block-diagonal layout
(:func:`pace_nb.nn.gcn.batch_graphs`): layer 1 is ONE sparse product of the block-diagonal
features with the stacked weights (``embedding_bag``; dense ``bmm`` for dense features), both
propagations are one block-diagonal sparse product each, layer 2 is one ``bmm``, and the
optimizer is the fused Adam kernel applied per model slice (bitwise batch-independent).
Everything constant across epochs (sparse X and its transpose, P and Pᵀ, train-row indices) is
built once per chunk; layer-1 weights are stored transposed so no epoch copies them. Dropout
masks at p = ½ (the papers' value) are the per-model generators' random bits
(:func:`~pace_nb.nn.gcn.dropout_bits_`, one 32-bit draw per 32 entries, ``TrainConfig.dropout_draw="auto"``);
other rates, or ``dropout_draw="uniform"``, draw a uniform per entry (:func:`~pace_nb.nn.gcn.dropout_masks_`).
The epochs run inside :func:`~pace_nb.core.memory.retained_heap`, so their large buffers are reused,
not page-faulted in again every epoch.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from collections.abc import Callable, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.config import PAPER_SEEDS, model_seed, progress as _progress, resolve_device
from pace_nb.core.errors import ConfigError
from pace_nb.core.memory import retained_heap
from pace_nb.core.validation import Interval, Options, check_seeds, declared, param, validate_params
from pace_nb.data.federation import ClientGraph, FederatedGraph
from pace_nb.nn.gcn import (Params, batched_forward, dropout_bits_, dropout_masks_, feature_nnz, init_params,
                            propagation_matrix, sparse_enough, stack_params)
from pace_nb.nn import gcn as _gcn
from pace_nb.nn.chunk import check_finite, chunk_layout, clear_shared_layouts, mask_rows, shared_layouts  # noqa: F401  (re-exported)
from pace_nb.nn.inference import batched_logits, client_hidden, client_logits  # noqa: F401  (re-exported)
from pace_nb.nn.optim import PROXIMAL_BLOCK, AdamState, add_proximal_, make_optimizer
from pace_nb.nn.ragged import ragged_forward


#: How the trainer draws dropout masks (:attr:`TrainConfig.dropout_draw`, :func:`train_models`'s ``dropout_draw``).
DROPOUT_DRAWS: tuple[str, ...] = ("uniform", "bits")


def resolve_dropout_draw(draw: str, p: float) -> str:
    """``"auto"`` → ``"bits"`` when ``p`` is ½ (or 0: no masks), else ``"uniform"``; other names are checked."""
    if draw == "auto":
        return "bits" if p in (0.0, 0.5) else "uniform"
    if draw not in DROPOUT_DRAWS:
        raise ConfigError(f"dropout_draw must be 'auto' or one of {DROPOUT_DRAWS}, got {draw!r}")
    if draw == "bits" and p not in (0.0, 0.5):
        raise ConfigError(f"dropout_draw='bits' draws p = 0.5 masks; the config asks for dropout={p}")
    return draw


@declared
@dataclass(frozen=True)
class TrainConfig:
    """Local training hyperparameters (PACE paper / OpenFGL defaults)."""

    hidden: int = param(64, Interval(int, 1, 1 << 16), help="hidden width")
    dropout: float = param(0.5, Interval(float, 0.0, 1.0, closed="left"))
    lr: float = param(0.01, Interval(float, 0.0, 10.0, closed="right"))
    weight_decay: float = param(5e-4, Interval(float, 0.0, 1.0))
    epochs: int = param(100, Interval(int, 1, 100_000))
    dropout_draw: str = param("auto", Options(("auto",) + DROPOUT_DRAWS),
                              help="dropout masks: 'uniform' (one uniform per entry), 'bits' (p = 1/2 from "
                                   "random bits, ~4x cheaper), 'auto' (the default) = bits at p = 1/2, else uniform")

    def __post_init__(self):
        validate_params(self)
        resolve_dropout_draw(self.dropout_draw, self.dropout)

    @staticmethod
    def model_seed(run_seed: int, client: int) -> int:
        """Dropout-generator seed of model (run seed, client) — :func:`pace_nb.core.config.model_seed`."""
        return model_seed(run_seed, client)


@dataclass
class TrainStep:
    """What ``extra_loss`` sees at every epoch (one chunk of models)."""

    params: Params  # batched, requires grad, rows = models of this chunk
    hidden: list[Tensor]  # per model: post-ReLU pre-dropout layer-1 output on its client's nodes
    logits: list[Tensor]  # per model: training-mode logits on its client's nodes
    models: list[int]  # global model indices (into train_models' B) of this chunk
    clients: list[int]  # client index of each model
    epoch: int
    pre_hidden: list[Tensor] | None = None  # per model: pre-ReLU layer-1 output (FedRCL's feature)

    def by_client(self) -> list[tuple[int, list[int]]]:
        """The chunk's models grouped by client, ``[(client, positions in this step), ...]`` in first-seen
        order — models of one client share its graph and labels, so a loss can stack them ([S, n, d])."""
        groups: dict[int, list[int]] = {}
        for i, k in enumerate(self.clients):
            groups.setdefault(int(k), []).append(i)
        return list(groups.items())


def _check_inputs(clients, init: Params, model_seeds, client_of, config: TrainConfig) -> int:
    if not clients:
        raise ConfigError("train_models needs at least one client")
    missing = [k for k in ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias") if k not in init]
    if missing:
        raise ConfigError(f"init Params lacks {missing}")
    b = int(init["conv1.weight"].shape[0])
    if init["conv1.weight"].dim() != 3:
        raise ConfigError("init must be batched Params (leading model axis), e.g. stack_params([...])")
    if len(model_seeds) != b or len(client_of) != b:
        raise ConfigError(f"init has {b} models but {len(model_seeds)} model_seeds and {len(client_of)} client_of")
    nf = int(clients[0].x.shape[1])
    if init["conv1.weight"].shape[1:] != (config.hidden, nf):
        raise ConfigError(f"init conv1.weight has shape {tuple(init['conv1.weight'].shape[1:])}, "
                          f"expected (hidden={config.hidden}, features={nf})")
    for k in set(int(c) for c in client_of):
        if not 0 <= k < len(clients):
            raise ConfigError(f"client_of refers to client {k}, but there are {len(clients)} clients")
    return b


def _feature_nnz(client: ClientGraph, memo: dict) -> int:
    """Non-zero feature count of one client, counted once per ``memo`` (a per-federation invariant)."""
    key = ("nnz", id(client))
    if key not in memo:
        memo[key] = (feature_nnz(client.x), client)  # the client is held so its id stays unique
    return memo[key][0]


def _bytes_per_model(client: ClientGraph, hidden: int, num_classes: int, n_params: int, rows: int,
                     memo: dict) -> int:
    """Rough peak bytes one model adds to a chunk: params + grad + 2 Adam states, its share of the
    block-diagonal X, Xᵀ, P, Pᵀ (index + value per entry) and its activations (``rows``: the
    client's own nodes, or the padded size)."""
    nnz_p = int(client.edge_index.shape[1]) + client.num_nodes
    return 4 * 4 * n_params + 2 * 12 * (_feature_nnz(client, memo) + nnz_p) + 4 * rows * (8 * hidden + 6 * num_classes)


def _auto_batch(clients, client_of, init: Params, config: TrainConfig, device: torch.device, nmax: int | None,
                memo: dict) -> int:
    """Largest chunk whose estimated footprint stays below 40 % of the free (device) memory
    (``nmax`` None: the ragged layout, each model's own rows)."""
    n_params = sum(int(v[0].numel()) for v in init.values())
    c = int(init["conv2.weight"].shape[1])
    per = max(_bytes_per_model(clients[k], config.hidden, c, n_params, nmax or clients[k].num_nodes, memo)
              for k in set(client_of))
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        try:
            import psutil

            free = psutil.virtual_memory().available
        except ImportError:  # pragma: no cover
            free = 4 << 30
    return max(1, int(0.4 * free // max(per, 1)))


def _per_model(t: Tensor, sizes: list[int], nmax: int | None) -> list[Tensor]:
    """Each model's own rows of a chunk's row tensor — by ``split`` (ragged) or ``unbind`` (padded), whose
    backward joins the pieces' gradients once; a slice per model would zero-fill a gradient the size of
    the whole chunk for every model it touches."""
    if nmax is None:
        return list(t.split(sizes))
    return [p[:n] for p, n in zip(t.view(len(sizes), nmax, -1).unbind(0), sizes, strict=True)]


def _train_chunk(clients, props, init: Params, seeds, client_of, models, config: TrainConfig, extra_loss,
                 device: torch.device, show: bool, nmax: int | None, sparse: bool, record: bool, optimizer,
                 layouts: dict, state: AdamState | None, ids, dropout_draw: str,
                 proximal: tuple[float, Params] | None = None):
    """Train one chunk of models for ``config.epochs``; returns (params on CPU, curves [E, B, 3] or None:
    training CE, training accuracy, validation accuracy — all of the epoch's training-mode forward).
    ``nmax`` None: the ragged layout (:mod:`pace_nb.nn.ragged`), else every client padded to ``nmax``."""
    b = len(models)
    # layer-1 weights/masks are stored transposed ([B, F, H]) so the block-diagonal product needs no copy
    # (layer 2 keeps [B, C, H]: bmm is faster with it); Adam is elementwise, layout changes no value.
    flip = {k: k.startswith("conv1.") and init[k].dim() == 3 for k in init}
    store = {k: (v.transpose(1, 2) if flip[k] else v).to(device, torch.float32).contiguous().requires_grad_(True)
             for k, v in init.items()}
    params = {k: (v.transpose(1, 2) if flip[k] else v) for k, v in store.items()}
    opt = make_optimizer(list(store.values()), config, optimizer, list(store), state, ids)
    mu, anchored = proximal if proximal is not None else (0.0, {})
    anchors = [(store[k], (a.transpose(1, 2) if flip[k] else a).to(device, torch.float32).contiguous())
               for k, a in anchored.items()]  # in the stored layout, like the weights they anchor
    prox_buf = torch.empty(PROXIMAL_BLOCK) if anchors and device.type == "cpu" else None  # add_proximal_'s blocks
    g, offsets = chunk_layout(clients, props, client_of, nmax, sparse, device, layouts)
    sizes = g.sizes
    rows_total = sum(sizes) if nmax is None else b * nmax
    tr_idx, tr_y, tr_w, tr_m = mask_rows(clients, client_of, offsets, "train_mask", device)
    if record:  # validation rows: read only for the recorded accuracy, never by the loss
        va_idx, va_y, va_w, va_m = mask_rows(clients, client_of, offsets, "val_mask", device)
        no_val = [i for i, k in enumerate(client_of) if not bool(clients[k].val_mask.any())]
    gens = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
    masks = torch.zeros(rows_total, config.hidden, device=device) if config.dropout > 0 else None
    segments = list(zip(offsets, sizes, strict=True))  # each model's rows of ``masks``
    curves = torch.zeros(config.epochs, b, 3, device=device) if record else None
    first_bad = torch.full((), -1, dtype=torch.long, device=device)  # first epoch with a non-finite loss
    forward = ragged_forward if nmax is None else batched_forward
    fmasks = masks if masks is None or nmax is None else masks.view(b, nmax, config.hidden)
    for epoch in _progress(range(config.epochs), show, desc=f"train {b} models"):
        opt.zero_grad()
        if masks is not None and dropout_draw == "bits":
            dropout_bits_(masks, segments, gens)
        elif masks is not None:
            dropout_masks_(masks, segments, config.dropout, gens)
        z, h, pre = (t.reshape(rows_total, -1) for t in forward(params, g, dropout_masks=fmasks, with_pre=True))
        zt = z[tr_idx]
        ce = F.cross_entropy(zt, tr_y, reduction="none")
        loss = (ce * tr_w).sum()
        if extra_loss is not None:
            step = TrainStep(params, _per_model(h, sizes, nmax), _per_model(z, sizes, nmax), list(models),
                             list(client_of), epoch, _per_model(pre, sizes, nmax))
            loss = loss + extra_loss(step)
        with torch.no_grad():  # on-device flag: no host sync per epoch
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), epoch, first_bad)
        loss.backward()
        for p, a in anchors:  # μ/2 ‖θ − θ_a‖²'s gradient μ (θ − θ_a): autograd's values, without its passes
            add_proximal_(p, a, mu, prox_buf)
        opt.step()
        if curves is not None:
            with torch.no_grad():
                curves[epoch, :, 0].index_add_(0, tr_m, ce.detach() * tr_w)
                curves[epoch, :, 1].index_add_(0, tr_m, (zt.argmax(1) == tr_y).float() * tr_w)
                curves[epoch, :, 2].index_add_(0, va_m, (z[va_idx].argmax(1) == va_y).float() * va_w)
    if curves is not None and no_val:
        curves[:, no_val, 2] = float("nan")  # a client without validation nodes has no validation accuracy
    out = {k: (v.detach().transpose(1, 2) if flip[k] else v.detach()).contiguous().cpu() for k, v in store.items()}
    check_finite(int(first_bad), out, models, config)
    if state is not None:
        opt.save(state)
    return out, (curves.cpu() if curves is not None else None)


def train_models(clients: Sequence[ClientGraph], init: Params, model_seeds: Sequence[int],
                 client_of: Sequence[int], config: TrainConfig = TrainConfig(), *,
                 extra_loss: Callable[[TrainStep], Tensor] | None = None, device="auto",
                 record: bool = False, progress: bool = True,
                 max_batch: int | None = None, pad_to: int | None = None,
                 optimizer: dict | None = None, layouts: dict | None = None, ragged: bool = True,
                 optimizer_state: AdamState | None = None, dropout_draw: str | None = None,
                 proximal: tuple[float, Params] | None = None,
                 _ids: Sequence[int] | None = None) -> tuple[Params, pd.DataFrame | None]:
    """Train B independent GCNs: model b on ``clients[client_of[b]]`` from ``init[b]`` with
    dropout generator seeded ``model_seeds[b]`` (full-batch CE on the train mask; validation
    and test labels never reach the loss); ``optimizer`` None = Adam, ``{"name": "sgd", ...}`` = SGD. Returns the last-epoch Params (batched, CPU) and, with
    ``record``, a tidy DataFrame ``model, epoch, loss, train_acc, val_acc`` (fractions): all three read
    from the epoch's ONE training forward, before its step — so ``val_acc`` is the accuracy on the
    client's validation nodes **measured with dropout on** (a noisy, pessimistic view of the eval-mode
    accuracy; NaN for a client without validation nodes). Recording runs no extra forward and changes
    no parameter: the trained Params are bitwise those of ``record=False``.
    ``layouts``: a dict kept by the caller across calls on the SAME (unchanged) clients — e.g. the
    rounds of one federated run — that holds their propagation matrices, layouts and feature counts,
    so they are built once (the values are identical, so results are too); None: the memo of the
    clients trained on last (:func:`shared_layouts`), so consecutive trainings on one federation share it.
    ``ragged`` (default): products over each client's own rows (:mod:`pace_nb.nn.ragged`); False: the
    padded layout (every client padded to the largest, or to ``pad_to``).
    ``dropout_draw``: overrides ``config.dropout_draw`` — ``"bits"`` (p = ½ only: the masks from the
    generators' random bits, :func:`~pace_nb.nn.gcn.dropout_bits_`), ``"uniform"`` (one uniform per
    entry, :func:`~pace_nb.nn.gcn.dropout_masks_`) or ``"auto"`` (bits at p = ½, the default).
    ``proximal``: ``(μ, anchors)`` adds ``μ/2 ‖θ_b − a_b‖²`` over the anchors' keys (batched like
    ``init``) to every model's objective (FedProx): its gradient ``μ (θ − a)`` is added after the backward
    pass — bitwise autograd's gradient of that loss, without building it.
    ``optimizer_state``: a dict kept by the caller across calls — Adam's moments and step count of
    model b are read from and written to ``optimizer_state[b]`` (a missing entry starts fresh), so
    e.g. the rounds of a federated run continue each client's Adam; None = a fresh Adam per call.
    """
    b = _check_inputs(clients, init, model_seeds, client_of, config)
    dropout_draw = resolve_dropout_draw(config.dropout_draw if dropout_draw is None else dropout_draw, config.dropout)
    client_of = [int(k) for k in client_of]
    ids = list(range(b)) if _ids is None else [int(i) for i in _ids]
    empty = sorted({k for k in client_of if int(clients[k].train_mask.sum()) == 0})
    if empty:
        # A client without training nodes (e.g. a tiny Dirichlet client) cannot train: its models
        # keep their initial parameters, exactly as if the client skipped the local phase.
        warnings.warn(f"clients {empty} have no training nodes; their models keep the initial parameters",
                      RuntimeWarning, stacklevel=2)
        keep = [i for i, k in enumerate(client_of) if k not in empty]
        params = {n: v.detach().clone().cpu() for n, v in init.items()}
        frame = None
        if keep:
            sub, frame = train_models(clients, {n: v[keep] for n, v in init.items()}, [model_seeds[i] for i in keep],
                                      [client_of[i] for i in keep], config, extra_loss=_reindexed(extra_loss, keep),
                                      device=device, record=record, progress=progress, max_batch=max_batch,
                                      pad_to=pad_to or max(clients[k].num_nodes for k in set(client_of)),
                                      optimizer=optimizer, layouts=layouts, ragged=ragged,
                                      optimizer_state=optimizer_state, dropout_draw=dropout_draw,
                                      proximal=None if proximal is None else
                                      (proximal[0], {n: v[keep] for n, v in proximal[1].items()}),
                                      _ids=[ids[i] for i in keep])
            for n in params:
                params[n][keep] = sub[n]
            if frame is not None:
                frame["model"] = [keep[m] for m in frame["model"]]
        return params, frame
    dev = resolve_device(device)
    used = sorted(set(client_of))
    if layouts is None:
        layouts = shared_layouts(clients)
    memo = layouts
    for k in used:
        if ("props", k) not in memo:
            memo[("props", k)] = propagation_matrix(clients[k].edge_index, clients[k].num_nodes)
    props = {k: memo[("props", k)] for k in used}
    # padded: one padding for every chunk, so chunking changes nothing; ragged: no padding at all
    nmax = None if ragged else pad_to or max(clients[k].num_nodes for k in used)
    size = max_batch if max_batch is not None else _auto_batch(clients, client_of, init, config, dev, nmax, memo)
    if size < 1:
        raise ConfigError(f"max_batch must be >= 1, got {max_batch}")
    sparse_key = ("sparse", tuple(used), _gcn.SPARSE_DENSITY)  # a changed threshold decides anew
    if sparse_key not in memo:
        memo[sparse_key] = sparse_enough(sum(_feature_nnz(clients[k], memo) for k in used),
                                                      sum(clients[k].num_nodes for k in used),
                                                      int(clients[used[0]].x.shape[1]))
    sparse = memo[sparse_key]
    out: list[Params] = []
    curves = []
    for start in range(0, b, size):
        idx = list(range(start, min(b, start + size)))
        with retained_heap():  # the epochs reuse their large buffers instead of page-faulting them in
            p, cur = _train_chunk(clients, props, {k: v[idx] for k, v in init.items()}, [model_seeds[i] for i in idx],
                                  [client_of[i] for i in idx], idx, config, extra_loss, dev, progress, nmax, sparse,
                                  record, optimizer, layouts, optimizer_state, [ids[i] for i in idx], dropout_draw,
                                  None if proximal is None else (proximal[0], {k: v[idx] for k, v in proximal[1].items()}))
        out.append(p)
        curves.append(cur)
    params = {k: torch.cat([p[k] for p in out]) for k in out[0]}
    frame = None
    if record:
        cur = torch.cat(curves, dim=1)  # [E, B, 3]
        e, nb = cur.shape[:2]
        frame = pd.DataFrame({
            "model": torch.arange(nb).repeat(e).numpy(),
            "epoch": torch.arange(e).repeat_interleave(nb).numpy(),
            "loss": cur[..., 0].reshape(-1).numpy(),
            "train_acc": cur[..., 1].reshape(-1).numpy(),
            "val_acc": cur[..., 2].reshape(-1).numpy(),
        })
    return params, frame


def _reindexed(extra_loss, keep: list[int]):
    """Wrap ``extra_loss`` so that it sees the caller's global model indices."""
    if extra_loss is None:
        return None

    def wrapped(step: TrainStep) -> Tensor:
        step.models = [keep[i] for i in step.models]
        return extra_loss(step)

    return wrapped


@dataclass
class LocalModels:
    """Local models W_L of every (seed, client), seed-major: ``b = s * K + k``."""

    seeds: tuple[int, ...]
    num_clients: int
    init: list[Params]  # W0 per seed
    params: Params  # batched, B = S * K
    config: TrainConfig
    curves: pd.DataFrame | None = None

    def model(self, s: int, k: int) -> Params:
        """Params of client ``k`` under the ``s``-th seed (position in ``seeds``)."""
        if not (0 <= s < len(self.seeds) and 0 <= k < self.num_clients):
            raise ConfigError(f"no local model (seed #{s}, client {k}); "
                              f"{len(self.seeds)} seeds × {self.num_clients} clients")
        b = s * self.num_clients + k
        return {n: v[b] for n, v in self.params.items()}


def train_local(fg: FederatedGraph, seeds: Sequence[int] = PAPER_SEEDS, config: TrainConfig = TrainConfig(), *,
                device="auto", extra_loss=None, record: bool = False, progress: bool = True) -> LocalModels:
    """Train every client's local GCN for every run seed (docs/DESIGN.md §5 "Local"): W0 =
    ``init_params(F, C, H, seed)`` shared by the clients of a seed; dropout seed
    ``config.model_seed(seed, k)``."""
    seeds = check_seeds(seeds)
    k_n = fg.num_clients
    w0 = [init_params(fg.num_features, fg.num_classes, config.hidden, s) for s in seeds]
    init = stack_params([w for w in w0 for _ in range(k_n)])
    mseeds = [config.model_seed(s, k) for s in seeds for k in range(k_n)]
    client_of = [k for _ in seeds for k in range(k_n)]
    params, curves = train_models(fg.clients, init, mseeds, client_of, config, extra_loss=extra_loss,
                                  device=device, record=record, progress=progress)
    return LocalModels(seeds, k_n, w0, params, config, curves)
