"""GCN parameters as plain tensor dicts (docs/DESIGN.md §5 "Local").

A model is a ``dict[str, Tensor]`` ("Params") in PyG ``GCNConv`` layout:
``conv1.weight [H, F]``, ``conv1.bias [H]``, ``conv2.weight [C, H]``, ``conv2.bias [C]``,
optionally ``conv1.mask`` / ``conv2.mask`` (same shape as the weight; the effective weight
is ``weight * mask``, FedPub's masked GCN). A *batched* Params has a leading model axis B.
An optional linear head ``lin.weight [C, H2]``, ``lin.bias [C]`` (and ``lin.mask``) turns
``conv2`` into a hidden layer (``conv2.weight [H2, H]``): ``z = relu(conv2 out) W_linᵀ + b``
(OpenFGL's FedPub model: masked GCN F→64, masked GCN 64→64, masked linear 64→C).

The forward pass is Kipf & Welling's 2-layer GCN with PyG semantics:
``h = relu(P X W1ᵀ + b1)``, dropout on ``h`` while training, ``z = P h W2ᵀ + b2`` with
``P = D^-1/2 (A + I) D^-1/2`` (:func:`propagation_matrix`, PyG's ``gcn_norm``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.errors import ConfigError

Params = dict[str, Tensor]

#: Keys every GCN Params holds (masks are optional).
WEIGHT_KEYS: tuple[str, ...] = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias")


def init_params(num_features: int, num_classes: int, hidden: int = 64, seed: int = 0) -> Params:
    """W0 of a 2-layer GCN, bit-identical to ``torch.manual_seed(seed)`` followed by
    ``GCNConv(F, H)``, ``GCNConv(H, C)`` (glorot weights, zero biases).

    The global RNG state is left untouched (``torch.random.fork_rng``).
    """
    from torch_geometric.nn import GCNConv

    if min(num_features, num_classes, hidden) < 1:
        raise ConfigError(f"GCN sizes must be positive, got F={num_features}, C={num_classes}, H={hidden}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        conv1 = GCNConv(num_features, hidden)
        conv2 = GCNConv(hidden, num_classes)
    return {
        "conv1.weight": conv1.lin.weight.detach().clone(),
        "conv1.bias": conv1.bias.detach().clone(),
        "conv2.weight": conv2.lin.weight.detach().clone(),
        "conv2.bias": conv2.bias.detach().clone(),
    }


def propagation_matrix(edge_index: Tensor, num_nodes: int, *, add_self_loops: bool = True,
                       dtype: torch.dtype = torch.float32) -> Tensor:
    """Sparse COO ``P = D^-1/2 (A + I) D^-1/2`` [n, n] exactly as PyG's ``gcn_norm``.

    ``P[i, j]`` is the weight of the message j → i (PyG's default ``source_to_target`` flow),
    so ``P @ H`` equals ``GCNConv``'s aggregation.
    """
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    edge_index = torch.as_tensor(edge_index, dtype=torch.long)
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ConfigError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ConfigError(f"edge_index refers to nodes outside 0..{num_nodes - 1}")
    ei, w = gcn_norm(edge_index, None, num_nodes, improved=False,
                     add_self_loops=add_self_loops, dtype=dtype)
    src, dst = ei[0], ei[1]
    return torch.sparse_coo_tensor(torch.stack([dst, src]), w, (num_nodes, num_nodes),
                                   check_invariants=False).coalesce()


def effective_weight(params: Params, layer: int | str) -> Tensor:
    """``conv{layer}.weight`` (or ``{layer}.weight`` for a name such as ``"lin"``) times its mask
    when the Params carries one."""
    name = f"conv{layer}" if isinstance(layer, int) else layer
    w = params[f"{name}.weight"]
    m = params.get(f"{name}.mask")
    return w if m is None else w * m


def linear_head(params: Params, h2: Tensor) -> Tensor:
    """``relu(h2) W_linᵀ + b_lin`` when the Params has a ``lin`` head, else ``h2`` unchanged."""
    if "lin.weight" not in params:
        return h2
    w = effective_weight(params, "lin")
    a = F.relu(h2)
    out = torch.matmul(a, w.transpose(-1, -2)) if w.dim() == 2 else _BatchedLinear.apply(a, w)
    bias = params["lin.bias"]
    return out + (bias if w.dim() == 2 else bias[:, None, :])


def _propagate(P: Tensor, h: Tensor) -> Tensor:
    return torch.sparse.mm(P, h) if P.is_sparse else P @ h


def gcn_forward(params: Params, x: Tensor, P: Tensor, *, dropout: float = 0.0, training: bool = False,
                generator: torch.Generator | None = None, return_hidden: bool = False):
    """Logits [n, C] of one (unbatched) GCN; ``return_hidden`` → ``(logits, h)`` with ``h``
    the post-ReLU, pre-dropout layer-1 output [n, H]. ``x`` [n, F] is dense, sparse COO (densified) or
    sparse CSR (layer 1 as one ``embedding_bag``, :func:`csr_mm`).

    Dropout (training only) uses ``F.dropout`` semantics: keep with probability 1 - p,
    scale kept units by 1/(1 - p); the mask is drawn with ``generator`` (see :func:`dropout_mask`).
    """
    w1t = effective_weight(params, 1).t()
    if x.layout == torch.sparse_csr:
        xw = csr_mm(x, w1t.contiguous())
    else:
        xw = (x.to_dense() if x.is_sparse else x) @ w1t
    h = F.relu(_propagate(P, xw) + params["conv1.bias"])
    hd = h
    if training and dropout > 0:
        hd = h * dropout_mask(h.shape, dropout, generator, h.device, h.dtype)
    z = linear_head(params, _propagate(P, hd @ effective_weight(params, 2).t()) + params["conv2.bias"])
    return (z, h) if return_hidden else z


def dropout_mask(shape, p: float, generator: torch.Generator | None, device, dtype=torch.float32,
                 out: Tensor | None = None) -> Tensor:
    """Scaled Bernoulli(1 - p) keep-mask: ``1/(1-p)`` where ``U >= p`` with ``U ~ U[0, 1)`` from
    ``generator``, else 0 (``F.dropout`` semantics). ``out`` is filled in place when given."""
    u = torch.empty(shape, device=device, dtype=dtype) if out is None else out
    return dropout_masks_(u, [(0, int(u.shape[0]))], p, [generator])


def dropout_masks_(out: Tensor, segments: Sequence[tuple[int, int]], p: float,
                   generators: Sequence[torch.Generator | None]) -> Tensor:
    """Fill ``out[o:o+n]`` with :func:`dropout_mask` of ``generators[i]`` for the i-th segment ``(o, n)``
    of rows, in place: the same values, with the threshold and scale applied once to all of ``out``
    (rows outside every segment must hold 0: they end 0 for ``p`` > 0)."""
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"dropout must be in [0, 1), got {p}")
    for (o, n), gen in zip(segments, generators, strict=True):
        drawn_(out[o:o + n], "uniform_", 0.0, 1.0, generator=gen)
    return out.ge_(p).mul_(1.0 / (1.0 - p))


def drawn_(t: Tensor, fill: str, *args, generator: torch.Generator | None) -> Tensor:
    """``t.<fill>(*args, generator=generator)`` (e.g. ``"uniform_"``, ``"normal_"``) on any device of ``t``:
    in place where the generator lives on ``t``'s device, else drawn on the generator's device and copied
    over — the same values a CPU generator gives on the CPU."""
    if generator is None or generator.device == t.device:
        return getattr(t, fill)(*args, generator=generator)
    return t.copy_(getattr(torch.empty(t.shape, dtype=t.dtype, device=generator.device), fill)(*args, generator=generator))


_BIT_TABLES: dict[tuple[str, torch.dtype], Tensor] = {}
_BYTE_SHIFTS = (0, 8, 16, 24)


def _bit_table(device, dtype) -> Tensor:
    """``[256, 8]``: row v holds ``2·bit_j(v)`` for j = 0..7 (the p = ½ keep-mask of byte v)."""
    key = (str(device), dtype)
    if key not in _BIT_TABLES:
        v, j = torch.arange(256).unsqueeze(1), torch.arange(8)
        _BIT_TABLES[key] = (((v >> j) & 1) * 2).to(device=device, dtype=dtype)
    return _BIT_TABLES[key]


def dropout_bits_(out: Tensor, segments: Sequence[tuple[int, int]],
                  generators: Sequence[torch.Generator | None]) -> Tensor:
    """Fill ``out[o:o+n]`` with p = ½ dropout keep-masks (0 or 2, ``F.dropout`` semantics) drawn as random
    bits: segment i takes ``⌈n·H/32⌉`` 32-bit words from ``generators[i]``, bit j of byte k of the stream
    keeps entry ``8k + j`` of the segment (row-major) — one generator draw per 32 entries and one table
    lookup per 8, instead of a uniform per entry. Each segment depends only on its own generator, so a
    model's masks do not depend on the chunk it is trained in; rows outside every segment are not written."""
    if out.dim() != 2:
        raise ConfigError(f"dropout_bits_ needs a [rows, H] tensor, got shape {tuple(out.shape)}")
    table, h = _bit_table(out.device, out.dtype), int(out.shape[1])
    shifts = torch.tensor(_BYTE_SHIFTS, device=out.device)
    starts = [0] + [o + n for o, n in segments]  # where each segment starts if they tile ``out`` in order
    if (out.is_contiguous() and starts[-1] == out.shape[0] and all(n * h % 32 == 0 for _, n in segments)
            and all(o == s for (o, _), s in zip(segments, starts, strict=False))):
        # back-to-back segments of whole words (the ragged layout, H = 64): every model draws its own
        # words into its slice of one buffer, then one byte split and one table lookup fill all of ``out``
        sizes = [n * h // 32 for _, n in segments]
        words = torch.empty(sum(sizes), dtype=torch.int64, device=out.device)
        for piece, gen in zip(words.split(sizes), generators, strict=True):
            piece.random_(0, 1 << 32, generator=gen)
        torch.index_select(table, 0, ((words.unsqueeze(1) >> shifts) & 255).view(-1), out=out.view(-1, 8))
        return out
    for (o, n), gen in zip(segments, generators, strict=True):
        total = n * h
        nbytes = -(-total // 8)
        words = torch.empty(-(-nbytes // 4), dtype=torch.int64, device=out.device).random_(0, 1 << 32, generator=gen)
        stream = ((words.unsqueeze(1) >> shifts) & 255).view(-1)[:nbytes]
        seg = out[o:o + n].view(-1)
        if total % 8 == 0:
            torch.index_select(table, 0, stream, out=seg.view(-1, 8))
        else:
            seg.copy_(table[stream].view(-1)[:total])
    return out


def stack_params(params: Sequence[Params]) -> Params:
    """List of single Params → batched Params (leading model axis)."""
    if not params:
        raise ConfigError("stack_params needs at least one Params")
    keys = list(params[0])
    for i, p in enumerate(params):
        if list(p) != keys:
            raise ConfigError(f"Params #{i} has keys {sorted(p)}, expected {sorted(keys)}")
    return {k: torch.stack([p[k] for p in params]) for k in keys}


def unstack_params(params: Params) -> list[Params]:
    """Batched Params → list of single Params (views; clone before mutating)."""
    sizes = {int(v.shape[0]) for v in params.values()}
    if len(sizes) != 1:
        raise ConfigError(f"batched Params with inconsistent leading sizes {sorted(sizes)}")
    (b,) = sizes
    return [{k: v[i] for k, v in params.items()} for i in range(b)]


def num_params_bytes(params: Params) -> int:
    """Dense float32 bytes of every tensor in ``params`` (the communication reference size)."""
    return 4 * sum(int(v.numel()) for v in params.values())


# ---- batched GCNs: B models on their clients' graphs in one block-diagonal layout (docs/DESIGN.md §10) ----------
def csr_mm(a: Tensor, d: Tensor, unit: bool = False) -> Tensor:
    """``a @ d`` for a sparse CSR ``a`` as one ``embedding_bag`` (weighted row sums of ``d``).

    Several times faster than ``torch.sparse.mm`` on CPU for narrow dense operands (H = 64),
    and each output row depends only on its own row of ``a`` (batch-independent results).
    ``unit``: every stored value of ``a`` is 1 (binary bag-of-words features), so plain row sums
    are taken — the same numbers (a product by 1 is exact, the summation order is unchanged),
    without reading the values.
    """
    return F.embedding_bag(a.col_indices(), d, a.crow_indices(), mode="sum",
                           per_sample_weights=None if unit else a.values(), include_last_offset=True)


def all_ones(a: Tensor) -> bool:
    """True when every stored value of the sparse tensor ``a`` is exactly 1."""
    v = a.values()
    return bool(v.numel() > 0 and (v == 1).all())


class _SpMM(torch.autograd.Function):
    """``A @ D`` for a constant sparse CSR ``A`` whose transpose ``At`` is precomputed (gradient ``At @ dY``);
    ``unit``: A's values are all 1 (:func:`csr_mm`)."""

    @staticmethod
    def forward(ctx, a: Tensor, at: Tensor, d: Tensor, unit: bool = False) -> Tensor:
        ctx.at, ctx.unit = at, unit
        return csr_mm(a, d, unit)

    @staticmethod
    def backward(ctx, g: Tensor):
        return None, None, csr_mm(ctx.at, g.contiguous(), ctx.unit), None


class _BatchedLinear(torch.autograd.Function):
    """``h @ wᵀ`` per model (h [B, n, d_in], w [B, d_out, d_in]) with the cheap backward products
    ``g @ w`` and ``gᵀ @ h`` (autograd's own bmm backward is several times slower for d_out = C)."""

    @staticmethod
    def forward(ctx, h: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(h, w)
        return torch.bmm(h, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, g: Tensor):
        h, w = ctx.saved_tensors
        dh = torch.bmm(g, w) if ctx.needs_input_grad[0] else None
        dw = torch.bmm(g.transpose(1, 2), h) if ctx.needs_input_grad[1] else None
        return dh, dw


def _block_diag_csr(blocks: Sequence[Tensor], row_step: int | Sequence[int], col_step: int | Sequence[int],
                    shape: tuple[int, int]) -> Tensor:
    """Block-diagonal CSR of coalesced COO ``blocks``; block b starts at (b·row_step, b·col_step), or at
    (row_step[b], col_step[b]) when offsets are given per block (the ragged layout).

    Concatenating coalesced blocks in order keeps (row, col) sorted, so no global sort is needed.
    """
    ro = row_step if not isinstance(row_step, int) else [b * row_step for b in range(len(blocks))]
    co = col_step if not isinstance(col_step, int) else [b * col_step for b in range(len(blocks))]
    rows = torch.cat([m.indices()[0] + ro[b] for b, m in enumerate(blocks)])
    cols = torch.cat([m.indices()[1] + co[b] for b, m in enumerate(blocks)])
    vals = torch.cat([m.values() for m in blocks])
    crow = torch.zeros(shape[0] + 1, dtype=torch.long)
    crow[1:] = torch.bincount(rows, minlength=shape[0]).cumsum(0)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": a UserWarning per process
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, cols, vals, shape, check_invariants=False)


def _with_transposes(mats: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """Coalesced COO of every matrix and of its transpose, computed once per distinct tensor."""
    memo: dict[int, tuple[Tensor, Tensor]] = {}
    for m in mats:
        if id(m) not in memo:
            c = (m if m.is_sparse else m.to_sparse()).coalesce()
            memo[id(m)] = (c, c.t().coalesce())
    return [memo[id(m)][0] for m in mats], [memo[id(m)][1] for m in mats]


@dataclass
class BatchedGraphs:
    """B client graphs padded to ``nmax`` rows each: model b owns rows ``[b·nmax, b·nmax + n_b)``.

    ``P``/``Pt``: block-diagonal CSR propagation [B·nmax, B·nmax] and its transpose. Features:
    sparse path — block-diagonal CSR ``x`` [B·nmax, B·F] (+ transpose ``xt``) multiplied with the
    stacked weights [B·F, H]; dense path — ``x`` [B, nmax, F] for ``bmm``.
    """

    sizes: list[int]
    nmax: int
    num_features: int
    P: Tensor
    Pt: Tensor
    x: Tensor
    xt: Tensor | None

    @property
    def num_models(self) -> int:
        return len(self.sizes)

    @property
    def sparse(self) -> bool:
        return self.xt is not None


#: Feature density below which layer 1 (training and evaluation) uses the sparse product of the features.
#: Single-threaded, Louvain K = 10 x 5 seeds, 50 Local models (``benchmarks/bench_sparse_threshold.py``):
#: Computers (binary, density 0.35) 26.1 s dense, 16.6 s sparse, so with the sparse cost linear in the
#: non-zeros binary features cross over near 0.55; PubMed (weighted, 0.10) 23.5 s dense, 8.4 s sparse.
SPARSE_DENSITY: float = 0.5


def feature_nnz(x: Tensor) -> int:
    """Non-zero entries of a feature matrix (a sparse one's stored entries)."""
    return int(x._nnz()) if x.is_sparse else int((x != 0).sum())


def sparse_enough(nnz: int, rows: int, num_features: int) -> bool:
    """Whether ``nnz`` non-zeros over ``rows`` × ``num_features`` are below :data:`SPARSE_DENSITY`
    (layer 1 then takes the sparse product: training, :func:`batch_graphs`, and evaluation)."""
    return nnz < SPARSE_DENSITY * rows * num_features


def to_csr(x: Tensor) -> Tensor:
    """A dense or COO feature matrix [n, F] as sparse CSR (same entries, row-major order)."""
    coo = (x if x.is_sparse else x.to_sparse()).coalesce()
    return _block_diag_csr([coo], 0, 0, (int(coo.shape[0]), int(coo.shape[1])))


def batch_graphs(xs: Sequence[Tensor], props: Sequence[Tensor], nmax: int | None = None, *,
                 sparse: bool | None = None, device="cpu") -> BatchedGraphs:
    """Lay out B graphs (features ``xs[b]`` [n_b, F], propagation ``props[b]`` sparse [n_b, n_b]).

    ``sparse=None`` picks the sparse feature path when the density is below :data:`SPARSE_DENSITY`.
    """
    sizes = [int(x.shape[0]) for x in xs]
    nmax = max(sizes) if nmax is None else int(nmax)
    b, f = len(xs), int(xs[0].shape[1])
    if sparse is None:
        sparse = sparse_enough(sum(feature_nnz(x) for x in xs), sum(sizes), f)
    R = b * nmax
    pc, pt = _with_transposes(props)
    P, Pt = _block_diag_csr(pc, nmax, nmax, (R, R)), _block_diag_csr(pt, nmax, nmax, (R, R))
    if sparse:
        xc, xtc = _with_transposes(xs)
        x, xt = _block_diag_csr(xc, nmax, f, (R, b * f)), _block_diag_csr(xtc, f, nmax, (b * f, R))
    else:
        x, xt = torch.zeros(b, nmax, f), None
        for i, xi in enumerate(xs):
            x[i, : sizes[i]] = xi.to_dense() if xi.is_sparse else xi
    dev = torch.device(device)
    return BatchedGraphs(sizes, nmax, f, P.to(dev), Pt.to(dev), x.to(dev), None if xt is None else xt.to(dev))


def batched_forward(params: Params, g: BatchedGraphs, *, dropout_masks: Tensor | None = None,
                    with_pre: bool = False) -> tuple[Tensor, ...]:
    """Logits [B, nmax, C] and post-ReLU pre-dropout hidden [B, nmax, H] of B GCNs at once.

    Same math as :func:`gcn_forward` per model; ``dropout_masks`` [B, nmax, H] (scaled keep-masks,
    zero on padding rows) multiplies the hidden layer. Padding rows carry no edges, so they never
    reach a real node; their logits are garbage and must be ignored. ``with_pre`` → also the
    pre-ReLU layer-1 output [B, nmax, H] (a third element).
    """
    b, n = g.num_models, g.nmax
    w1 = effective_weight(params, 1).transpose(1, 2)  # [B, F, H]; a view when stored transposed
    h_dim = w1.shape[2]
    if g.sparse:
        xw = _SpMM.apply(g.x, g.xt, w1.reshape(b * g.num_features, h_dim))
    else:
        xw = torch.bmm(g.x, w1).view(b * n, h_dim)
    pre = _SpMM.apply(g.P, g.Pt, xw).view(b, n, h_dim) + params["conv1.bias"][:, None, :]
    h = F.relu(pre)
    hd = h if dropout_masks is None else h * dropout_masks
    t = _BatchedLinear.apply(hd, effective_weight(params, 2)).view(b * n, -1)
    z = _SpMM.apply(g.P, g.Pt, t).view(b, n, -1) + params["conv2.bias"][:, None, :]
    return (linear_head(params, z), h, pre) if with_pre else (linear_head(params, z), h)
