"""Local optimizers of the batched trainer, applied model by model (DESIGN §10 "Speed").

:class:`ModelwiseAdam` is ``torch.optim.Adam`` (L2 weight decay) on batched tensors whose every
model slice is its own tensor; :class:`ModelwiseSGD` is ``torch.optim.SGD`` with momentum. Both are
elementwise, so a model's update is bitwise independent of the batch it trains in.

Adam's state (first/second moments and step count, Kingma & Ba 2015, Alg. 1) can outlive one call
of the trainer: an :data:`AdamState` dict kept by the caller maps a model id to its moments, so the
next call (the next federated round) continues them — OpenFGL creates each client's Adam once and
only replaces the weights by the global model every round.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError

#: model id → parameter name → (exp_avg, exp_avg_sq, step) in the trainer's storage layout.
AdamState = dict[int, dict[str, tuple[Tensor, Tensor, Tensor]]]


class ModelwiseAdam:
    """``torch.optim.Adam`` (L2 weight decay) on batched tensors, applied model by model.

    With a fused kernel (``torch._fused_adam_``, the kernel behind ``Adam(fused=True)``) every
    model's slice is its own tensor in ONE multi-tensor call: the CPU kernel's vector/scalar split
    and thread chunks then depend only on the model's own size, so a model's update is bitwise
    the same whatever else shares the batch (a whole-tensor fused step is not: its float tail
    and thread boundaries move with B). Without a fused kernel: plain single-tensor Adam.

    ``state``/``ids``: continue the moments and step counts of models ``ids`` from ``state``
    (missing entries start at zero, as a fresh Adam); :meth:`save` writes them back.
    """

    def __init__(self, params: list[Tensor], config, names: Sequence[str] | None = None,
                 state: AdamState | None = None, ids: Sequence[int] | None = None):
        self.params, self.config = params, config
        self.names = list(names) if names is not None else [str(i) for i in range(len(params))]
        self.ids = list(ids) if ids is not None else list(range(int(params[0].shape[0])))
        m, v, t = self._initial(state)
        self.m, self.v, self.t = m, v, t
        self.fused = _fused_available(params[0].device)
        if self.fused:
            # per-model views, made once (the storages never move)
            self.slices = [[u for x in xs for u in x.unbind(0)] for xs in (params, m, v)]
            self.steps = [u for x in t for u in x.unbind(0)]
        else:  # pragma: no cover - device without the fused kernel
            self.opt = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, foreach=False)
            for p, mi, vi, ti in zip(params, m, v, t, strict=True):
                if bool((ti != ti[0]).any()):
                    raise ConfigError("models of one chunk must share Adam's step count without a fused kernel")
                if float(ti[0]) > 0:
                    self.opt.state[p] = {"step": ti[0].clone(), "exp_avg": mi, "exp_avg_sq": vi}

    def _initial(self, state: AdamState | None):
        m, v, t = [], [], []
        for name, p in zip(self.names, self.params, strict=True):
            mi, vi = torch.zeros_like(p), torch.zeros_like(p)
            ti = torch.zeros(p.shape[0], dtype=torch.float32, device=p.device)
            for i, b in enumerate(self.ids):
                got = (state or {}).get(b, {}).get(name)
                if got is not None and got[0].shape == p.shape[1:]:
                    mi[i], vi[i], ti[i] = got[0], got[1], got[2]
            m.append(mi)
            v.append(vi)
            t.append(ti)
        return m, v, t

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        if not self.fused:  # pragma: no cover
            self.opt.step()
            return
        ps, ms, vs = self.slices
        gs = [u for p in self.params for u in (p.grad if p.grad is not None else torch.zeros_like(p)).unbind(0)]
        for t in self.t:
            t += 1
        torch._fused_adam_(ps, gs, ms, vs, [], self.steps, lr=self.config.lr, beta1=0.9, beta2=0.999,
                           weight_decay=self.config.weight_decay, eps=1e-8, amsgrad=False, maximize=False)

    @torch.no_grad()
    def save(self, state: AdamState) -> None:
        """Write every model's moments and step count into ``state`` (keyed by its id)."""
        if not self.fused:  # pragma: no cover
            for p, mi, vi, ti in zip(self.params, self.m, self.v, self.t, strict=True):
                st = self.opt.state.get(p)
                if st:
                    mi.copy_(st["exp_avg"])
                    vi.copy_(st["exp_avg_sq"])
                    ti.fill_(float(st["step"]))
        for i, b in enumerate(self.ids):
            state[b] = {name: (m[i].clone(), v[i].clone(), t[i].clone())
                        for name, m, v, t in zip(self.names, self.m, self.v, self.t, strict=True)}


class ModelwiseSGD:
    """``torch.optim.SGD`` (momentum, L2 weight decay) on batched tensors: elementwise, so every
    model's update is bitwise independent of the batch (FedNova's momentum-SGD diagnostic)."""

    def __init__(self, params: list[Tensor], config, momentum: float = 0.9, lr: float | None = None):
        self.params = params
        self.opt = torch.optim.SGD(params, lr=config.lr if lr is None else float(lr), momentum=float(momentum),
                                   weight_decay=config.weight_decay, foreach=False)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        self.opt.step()

    def save(self, state) -> None:
        """SGD's momentum buffers restart at every call (only Adam's state is kept)."""


#: Elements per block of :func:`add_proximal_` on the CPU (256 KiB of float32, so a block's three passes stay in cache).
PROXIMAL_BLOCK = 1 << 16


def add_proximal_(p: Tensor, anchor: Tensor, mu: float, buf: Tensor | None = None) -> None:
    """``p.grad += μ (p − anchor)``: the gradient of FedProx's ``μ/2 ‖θ − θ_a‖²`` as autograd forms it
    (``d = (p − a) · μ`` rounded, then added; ``p.grad`` None → ``d``). On the CPU, with a float buffer ``buf``
    of :data:`PROXIMAL_BLOCK` elements, block by block — the same operations on the same numbers, so the
    same bits, but each block's difference stays in cache instead of three passes over the whole tensor
    (CS, 21.8 M layer-1 weights: ``benchmarks/speed_limits.py``)."""
    x = p.detach()
    if p.grad is None:
        p.grad = torch.sub(x, anchor).mul_(mu)
        return
    g = p.grad
    if (buf is None or x.device.type != "cpu" or x.numel() <= buf.numel()
            or not (x.is_contiguous() and anchor.is_contiguous() and g.is_contiguous())):
        g.add_(torch.sub(x, anchor).mul_(mu))
        return
    n = buf.numel()
    for pp, aa, gg in zip(x.view(-1).split(n), anchor.view(-1).split(n), g.view(-1).split(n), strict=True):
        gg.add_(torch.sub(pp, aa, out=buf[:pp.numel()]).mul_(mu))


def make_optimizer(params: list[Tensor], config, optimizer: dict | None, names: Sequence[str] | None = None,
                   state: AdamState | None = None, ids: Sequence[int] | None = None):
    """Adam (default, :class:`ModelwiseAdam`) or ``{"name": "sgd", "momentum": ρ, "lr": η}``."""
    if not optimizer:
        return ModelwiseAdam(params, config, names, state, ids)
    spec = dict(optimizer)
    if spec.pop("name", None) != "sgd":
        raise ConfigError(f"unknown local optimizer {optimizer!r}; valid: None (Adam) or {{'name': 'sgd', ...}}")
    return ModelwiseSGD(params, config, **spec)


@functools.cache
def _fused_kernel(name: str) -> bool:
    device = torch.device(name)
    try:
        x = torch.zeros(2, device=device)
        torch._fused_adam_([x], [x.clone()], [x.clone()], [x.clone()], [], [torch.ones((), device=device)],
                           lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        return True
    except (RuntimeError, NotImplementedError, AttributeError):  # pragma: no cover - device without the kernel
        return False


def _fused_available(device: torch.device) -> bool:
    """Whether ``torch._fused_adam_`` runs on ``device`` (probed once per device)."""
    return _fused_kernel(str(device))
