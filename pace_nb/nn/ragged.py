"""Batched GCNs without padding: B models in one ragged row space (DESIGN §10 "Speed").

Model b owns rows ``[o_b, o_b + n_b)`` of ``N = Σ_b n_b`` rows (``o_b = Σ_{a<b} n_a``), so every
product touches only real nodes — the padded layout (:func:`pace_nb.nn.gcn.batch_graphs`) pads
every client to the largest one, which on a skewed partition multiplies the dense first-layer
product by ``B·n_max / N`` (3.66 on Computers, Dirichlet β = 0.05, K = 10).

Per model the math is :func:`pace_nb.nn.gcn.gcn_forward`'s: ``h = relu(P X W1ᵀ + b1)``,
``z = P (h ⊙ mask) W2ᵀ + b2``. Propagations (and sparse features) are one block-diagonal CSR
product (row-local ``embedding_bag``, as in the padded layout); each dense product is one
``torch.mm`` per model on that model's own rows, so a model's numbers do not depend on the other
models of the batch (bitwise the same alone or in any batch).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.gcn import (
    Params,
    _block_diag_csr,
    all_ones,
    _SpMM,
    _with_transposes,
    effective_weight,
    feature_nnz,
    sparse_enough,
)


@dataclass
class RaggedGraphs:
    """B client graphs stacked without padding (model b owns rows ``offsets[b] : offsets[b] + sizes[b]``).

    ``P``/``Pt``: block-diagonal CSR propagation [N, N] and its transpose. Features: sparse path —
    block-diagonal CSR ``x`` [N, B·F] (+ transpose ``xt``) multiplied with the stacked weights
    [B·F, H]; dense path — ``xs``, each model's dense features [n_b, F] (one tensor per client,
    shared by the models of that client).
    """

    sizes: list[int]
    offsets: list[int]
    num_features: int
    P: Tensor
    Pt: Tensor
    x: Tensor | None
    xt: Tensor | None
    xs: list[Tensor] | None
    lengths: Tensor  # sizes as a long tensor on the layout's device
    unit_x: bool = False  # every stored feature value is 1 (binary features: plain row sums)

    @property
    def num_models(self) -> int:
        return len(self.sizes)

    @property
    def num_rows(self) -> int:
        return sum(self.sizes)

    @property
    def sparse(self) -> bool:
        return self.xt is not None


def ragged_graphs(xs: Sequence[Tensor], props: Sequence[Tensor], *, sparse: bool | None = None,
                  device="cpu") -> RaggedGraphs:
    """Lay out B graphs (features ``xs[b]`` [n_b, F], propagation ``props[b]`` sparse [n_b, n_b]) without
    padding; ``sparse=None`` picks the sparse feature path below :data:`~pace_nb.nn.gcn.SPARSE_DENSITY`."""
    sizes = [int(x.shape[0]) for x in xs]
    offsets = [0]
    for n in sizes[:-1]:
        offsets.append(offsets[-1] + n)
    b, f, rows = len(xs), int(xs[0].shape[1]), sum(sizes)
    if sparse is None:
        sparse = sparse_enough(sum(feature_nnz(x) for x in xs), rows, f)
    dev = torch.device(device)
    pc, pt = _with_transposes(props)
    P, Pt = _block_diag_csr(pc, offsets, offsets, (rows, rows)), _block_diag_csr(pt, offsets, offsets, (rows, rows))
    x = xt = dense = None
    if sparse:
        xc, xtc = _with_transposes(xs)
        cols = [i * f for i in range(b)]
        x, xt = _block_diag_csr(xc, offsets, cols, (rows, b * f)), _block_diag_csr(xtc, cols, offsets, (b * f, rows))
        x, xt = _int32_indices(x).to(dev), _int32_indices(xt).to(dev)
    else:
        memo: dict[int, Tensor] = {}
        for xi in xs:
            if id(xi) not in memo:
                memo[id(xi)] = (xi.to_dense() if xi.is_sparse else xi).to(dev, torch.float32).contiguous()
        dense = [memo[id(xi)] for xi in xs]
    return RaggedGraphs(sizes, offsets, f, P.to(dev), Pt.to(dev), x, xt, dense,
                        torch.tensor(sizes, dtype=torch.long, device=dev), x is not None and all_ones(x))


def _int32_indices(a: Tensor) -> Tensor:
    """CSR ``a`` with 32-bit row offsets and column indices when its sizes allow: ``embedding_bag`` reads
    half the index bytes (the feature products, about 10 % faster on PubMed), the same sums in the same order."""
    if max(a.shape) >= 2**31 - 1 or a.values().numel() >= 2**31 - 1:
        return a
    return torch.sparse_csr_tensor(a.crow_indices().int(), a.col_indices().int(), a.values(), a.shape,
                                   check_invariants=False)


class _RaggedMM(torch.autograd.Function):
    """``y[rows of b] = x[rows of b] @ w[b]`` (w [B, d_in, d_out]), one ``mm`` per model; ``x`` is one
    [N, d_in] tensor, or None with ``consts`` the per-model constant inputs (features: no gradient)."""

    @staticmethod
    def forward(ctx, x, w, sizes, consts):
        segs = x.split(sizes) if x is not None else consts
        out = w.new_empty((sum(sizes), w.shape[2]))
        for b, (s, o) in enumerate(zip(segs, out.split(sizes), strict=True)):
            torch.mm(s, w[b], out=o)
        ctx.sizes, ctx.consts = sizes, consts
        ctx.save_for_backward(x, w)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.contiguous()
        gs = g.split(ctx.sizes)
        segs = x.split(ctx.sizes) if x is not None else ctx.consts
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = g.new_empty((g.shape[0], w.shape[1]))
            for b, (gb, o) in enumerate(zip(gs, dx.split(ctx.sizes), strict=True)):
                torch.mm(gb, w[b].t(), out=o)
        if ctx.needs_input_grad[1]:
            if w.dim() == 3 and w.stride(1) == 1 and w.stride(2) != 1:  # a transposed view of [B, d_out, d_in]
                # the gradient in the weight's own layout, gᵀ x per model: a GEMM with d_in (H) columns,
                # several times faster than xᵀ g with d_out = C columns
                dwt = g.new_empty((w.shape[0], w.shape[2], w.shape[1]))
                for b, (s, gb) in enumerate(zip(segs, gs, strict=True)):
                    torch.mm(gb.t(), s, out=dwt[b])
                dw = dwt.transpose(1, 2)
            else:
                dw = g.new_empty(w.shape)
                for b, (s, gb) in enumerate(zip(segs, gs, strict=True)):
                    torch.mm(s.t(), gb, out=dw[b])
        return dx, dw, None, None


class _RaggedBias(torch.autograd.Function):
    """``y[rows of b] + bias[b]``; the bias gradient is each model's own row sum."""

    @staticmethod
    def forward(ctx, y, bias, lengths, sizes):
        # in place on ``y``: every caller passes a product's fresh output, which no backward reads
        ctx.sizes = sizes
        ctx.mark_dirty(y)
        for b, seg in enumerate(y.split(sizes)):
            seg.add_(bias[b])
        return y

    @staticmethod
    def backward(ctx, g):
        db = torch.stack([s.sum(0) for s in g.split(ctx.sizes)]) if ctx.needs_input_grad[1] else None
        return g, db, None, None


def ragged_linear(x: Tensor, w: Tensor, bias: Tensor, g: RaggedGraphs) -> Tensor:
    """``x_b Wᵀ_b + bias_b`` per model (``w`` [B, d_out, d_in], PyG layout)."""
    return _RaggedBias.apply(_RaggedMM.apply(x, w.transpose(1, 2), g.sizes, None), bias, g.lengths, g.sizes)


def ragged_forward(params: Params, g: RaggedGraphs, *, dropout_masks: Tensor | None = None,
                   with_pre: bool = False) -> tuple[Tensor, ...]:
    """Logits [N, C] and post-ReLU pre-dropout hidden [N, H] of B GCNs (rows of model b:
    ``offsets[b] : offsets[b] + sizes[b]``); ``dropout_masks`` [N, H] scales the hidden layer;
    ``with_pre`` → also the pre-ReLU layer-1 output. A ``lin`` head (FedPub) applies per model."""
    w1 = effective_weight(params, 1).transpose(1, 2)  # [B, F, H]; a view when stored transposed
    if g.sparse:
        xw = _SpMM.apply(g.x, g.xt, w1.reshape(g.num_models * g.num_features, w1.shape[2]), g.unit_x)
    else:
        xw = _RaggedMM.apply(None, w1, g.sizes, g.xs)
    pre = _RaggedBias.apply(_SpMM.apply(g.P, g.Pt, xw), params["conv1.bias"], g.lengths, g.sizes)
    h = F.relu(pre)
    hd = h if dropout_masks is None else h * dropout_masks
    t = _RaggedMM.apply(hd, effective_weight(params, 2).transpose(1, 2), g.sizes, None)
    z = _RaggedBias.apply(_SpMM.apply(g.P, g.Pt, t), params["conv2.bias"], g.lengths, g.sizes)
    if "lin.weight" in params:
        z = ragged_linear(F.relu(z), effective_weight(params, "lin"), params["lin.bias"], g)
    return (z, h, pre) if with_pre else (z, h)
