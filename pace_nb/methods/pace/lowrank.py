"""Rank-r carriers of model updates, their wire format and byte accounting (PACE Eq. 2, 8).

A *carrier* is what travels for one tensor:

* a 2-D matrix ``Δ [d_out, d_in]`` with ``min(d_out, d_in) > r`` is sent as the factors of
  its best rank-r approximation (truncated SVD, Eckart–Young):
  ``left = U_r S_r [d_out, r]`` and ``right = V_r [d_in, r]``, so ``Δ̄ = left @ rightᵀ``.
  The singular values are folded into ``left``: ``(d_out + d_in)·r`` floats on the wire;
* every other tensor (vectors, matrices whose attainable rank is ≤ r) is sent dense.

``rank = 0`` (:data:`DENSE`, the one spelling: Python, grids, the CLI, Flower and result rows)
means "everything dense" (the rank study's *Dense* control). :func:`check_ranks` is the one check
of PACE's ranks: a rank is an integer in ``[0, MAX_RANK]``, and, given the weight matrices it
factorises, at most the largest rank one of them has — a larger one is impossible and is a
:class:`~pace_nb.core.errors.ConfigError` before any training.

Carriers may carry leading batch axes (e.g. all K clients of a seed, ``left [K, d_out, r]``);
:func:`unbatch` splits them into per-model carriers for the wire.

Wire format (:func:`serialize`), little-endian::

    b"PACEMSG1"                  8 bytes  magic + format version
    header length                4 bytes  uint32
    header                       JSON (utf-8, compact): [[name, kind, shape, rank], ...]
    payload                      float32 arrays in header order
                                 (dense: the tensor; lowrank: left then right, row-major)

"Framing" is everything that is not float32 payload: magic, length and the JSON header
(names, kinds, shapes, ranks), i.e. what a receiver needs to parse the message with no
prior agreement beyond the format. :func:`framing_bytes` reports it.
Ratios are taken against :func:`dense_model_bytes`: the float32 bytes of the dense model.
"""
from __future__ import annotations

import json
import struct
from collections import Counter
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError, DataCorruptionError
from pace_nb.core.limits import MAX_RANK
from pace_nb.core.validation import Interval

MAGIC = b"PACEMSG1"
_LEN = struct.Struct("<I")

Params = dict[str, Tensor]


#: The rank of the dense control (Table 5's *Dense*): every tensor travels dense.
DENSE = 0
#: What a carrier rank may be: :data:`DENSE` or an integer >= 1 (the Config fields' check).
RANK = Interval(int, DENSE, MAX_RANK)


def attainable_rank(shapes: Iterable[Sequence[int]]) -> int:
    """The largest rank of a matrix of one of ``shapes`` (``min(d_out, d_in)``, the layer width)."""
    return max((min(s[-2:]) for s in shapes if len(s) >= 2), default=0)


def check_ranks(ranks: Iterable[Any], what: str = "ranks", shapes: Iterable[Sequence[int]] = ()) -> tuple[int, ...]:
    """The one check of PACE's carrier ranks: distinct integers in ``[1, MAX_RANK]`` or 0 (dense);
    given the ``shapes`` of the weight matrices they factorise, none above :func:`attainable_rank`."""
    out = []
    for r in ranks:
        if not RANK.is_satisfied_by(r):
            raise ConfigError(f"{what} must be integers in [1, {MAX_RANK}] (0 = dense), got {r!r}")
        out.append(int(r))
    if not out:
        raise ConfigError(f"{what}: at least one value is needed")
    dup = sorted(r for r, n in Counter(out).items() if n > 1)
    if dup:
        raise ConfigError(f"{what}: duplicated value(s) {dup}")
    shapes = [tuple(s) for s in shapes]
    top = attainable_rank(shapes)
    if shapes and max(out) > top:
        raise ConfigError(f"{what}: rank {max(out)} is impossible: the weight matrices {shapes} have rank at most "
                          f"{top} (the layer width); use 1..{top}, or 0 for dense")
    return tuple(out)


def check_rank(rank: Any) -> int:
    """One carrier rank (see :func:`check_ranks`)."""
    return check_ranks([rank], "rank")[0]


def is_eligible(shape: tuple[int, ...] | torch.Size, rank: int, batch_dims: int = 0) -> bool:
    """True when a tensor of this (per-model) shape is sent as rank-r factors (Eq. 2)."""
    core = tuple(shape)[batch_dims:]
    return rank != DENSE and len(core) == 2 and min(core) > rank


def truncated_svd(mat: Tensor, rank: int) -> tuple[Tensor, Tensor]:
    """Best rank-r factors of ``mat [..., m, n]``: ``(U_r S_r [..., m, r], V_r [..., n, r])``.

    Computed in float64 (then cast back) from the Gram matrix of the shorter side: for a wide
    ``A`` (m ≤ n) the top-r eigenvectors ``U_r`` of ``A Aᵀ [m, m]`` and ``V_r S_r = Aᵀ U_r`` (columns
    normalised), for a tall one the top-r eigenvectors ``V_r`` of ``AᵀA`` and ``U_r S_r = A V_r``. Either
    way ``left @ rightᵀ`` is the exact projection of ``A`` onto the best rank-r subspace (``U_r U_rᵀ A``),
    the Eckart–Young optimum: error ``sqrt(Σ_{k>r} σ_k²)``. For PACE's 64 × F weights this is about 7×
    faster than a full SVD (which computes all 64 right singular vectors of length F only to keep r).
    The factors' signs are arbitrary, as an SVD's; their product is not.
    """
    if check_rank(rank) == DENSE:
        raise ConfigError("truncated_svd needs a rank >= 1, got 0")
    if mat.dim() < 2 or min(mat.shape[-2:]) < rank:
        raise ConfigError(f"cannot take rank-{rank} factors of a tensor of shape {tuple(mat.shape)}")
    a = mat.double()
    if a.shape[-2] <= a.shape[-1]:
        basis = torch.linalg.eigh(a @ a.mT)[1][..., -rank:].flip(-1)  # U_r, σ descending
        proj = a.mT @ basis  # V_r S_r
        s = torch.linalg.vector_norm(proj, dim=-2, keepdim=True)
        left, right = basis * s, proj / torch.where(s > 0, s, 1.0)
    else:
        right = torch.linalg.eigh(a.mT @ a)[1][..., -rank:].flip(-1)  # V_r
        left = a @ right
    return left.to(mat.dtype).contiguous(), right.to(mat.dtype).contiguous()


@dataclass(frozen=True)
class Carrier:
    """One tensor on the wire: ``dense`` or rank-r ``left @ rightᵀ`` (see module doc)."""

    shape: tuple[int, ...]
    dense: Tensor | None = None
    left: Tensor | None = None
    right: Tensor | None = None

    @property
    def kind(self) -> str:
        return "dense" if self.dense is not None else "lowrank"

    @property
    def rank(self) -> int:
        """Factor rank (0 for dense carriers)."""
        return 0 if self.left is None else int(self.left.shape[-1])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        t = self.dense if self.dense is not None else self._factors()[0]
        n_core = len(self.shape) if self.dense is not None else 2
        return tuple(t.shape[: t.dim() - n_core])

    def tensors(self) -> list[Tensor]:
        """The arrays sent, in wire order."""
        return [self.dense] if self.dense is not None else list(self._factors())

    def num_floats(self) -> int:
        """Floats on the wire per model."""
        if self.dense is not None:
            return int(np.prod(self.shape, dtype=np.int64))
        return (self.shape[0] + self.shape[1]) * self.rank

    def reconstruct(self) -> Tensor:
        """The tensor this carrier represents (``Δ̄``)."""
        if self.dense is not None:
            return self.dense
        left, right = self._factors()
        return left @ right.transpose(-1, -2)

    def _factors(self) -> tuple[Tensor, Tensor]:
        if self.left is None or self.right is None:
            raise ConfigError("a carrier holds either a dense tensor or both low-rank factors")
        return self.left, self.right


def to_carrier(tensor: Tensor, rank: int, batch_dims: int = 0) -> Carrier:
    """Carrier of one tensor (``P_r`` of Eq. 2/8): factors when eligible, dense otherwise."""
    rank = check_rank(rank)
    shape = tuple(tensor.shape[batch_dims:])
    if is_eligible(shape, rank):
        left, right = truncated_svd(tensor, rank)
        return Carrier(shape=shape, left=left, right=right)
    return Carrier(shape=shape, dense=tensor.contiguous())


def compress(params: Mapping[str, Tensor], rank: int, batch_dims: int = 0) -> dict[str, Carrier]:
    """``P_r`` applied to every tensor of a (possibly batched) Params dict (Eq. 2)."""
    return {name: to_carrier(t, rank, batch_dims) for name, t in params.items()}


def reconstruct(carriers: Mapping[str, Carrier]) -> Params:
    """Dense tensors represented by the carriers."""
    return {name: c.reconstruct() for name, c in carriers.items()}


def unbatch(carriers: Mapping[str, Carrier], index: int | tuple[int, ...]) -> dict[str, Carrier]:
    """The carriers of one model of a batched carrier dict (``index`` into the batch axes)."""
    out = {}
    for name, c in carriers.items():
        if c.dense is not None:
            out[name] = Carrier(shape=c.shape, dense=c.dense[index].contiguous())
        else:
            left, right = c._factors()
            out[name] = Carrier(shape=c.shape, left=left[index].contiguous(), right=right[index].contiguous())
    return out


def dense_carriers(tensors: Mapping[str, Tensor]) -> dict[str, Carrier]:
    """Dense carriers (e.g. sketches) of already-unbatched tensors."""
    return {name: Carrier(shape=tuple(t.shape), dense=t.contiguous()) for name, t in tensors.items()}


# --------------------------------------------------------------------------- wire format
def _header(carriers: Mapping[str, Carrier]) -> bytes:
    entries = []
    for name, c in carriers.items():
        if c.batch_shape:
            raise ConfigError(f"carrier {name!r} is batched {c.batch_shape}; unbatch() before serializing")
        entries.append([name, c.kind, list(c.shape), c.rank])
    return json.dumps(entries, separators=(",", ":")).encode("utf-8")


def serialize(carriers: Mapping[str, Carrier]) -> bytes:
    """The message as bytes (format in the module docstring); float32 payload."""
    header = _header(carriers)
    chunks = [MAGIC, _LEN.pack(len(header)), header]
    for c in carriers.values():
        for t in c.tensors():
            chunks.append(t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4", copy=False).tobytes())
    return b"".join(chunks)


def header_entries(carriers: Mapping[str, Carrier]) -> list[list]:
    """The header of a message of these carriers: ``[[name, kind, shape, rank], ...]``."""
    return json.loads(_header(carriers))


def message_size(entries) -> int:
    """Bytes of a message with this header (magic, length, header, float32 payload)."""
    header = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    floats = sum(int(np.prod(s, dtype=np.int64)) if k == "dense" else (s[0] + s[1]) * r for _, k, s, r in entries)
    return len(MAGIC) + _LEN.size + len(header) + 4 * floats


def read_header(blob: bytes, max_header: int = 1 << 20) -> tuple[list, int]:
    """The header entries of a message and the offset of its payload, reading nothing else; a header
    longer than ``max_header`` bytes or than the message is refused before it is parsed."""
    if len(blob) < len(MAGIC) + _LEN.size or not blob.startswith(MAGIC):
        raise DataCorruptionError("not a PACE message (bad magic)")
    start = len(MAGIC) + _LEN.size
    (hlen,) = _LEN.unpack_from(blob, len(MAGIC))
    if hlen > min(max_header, len(blob) - start):
        raise DataCorruptionError(f"PACE message header of {hlen} bytes (message {len(blob)}, at most {max_header})")
    try:
        entries = json.loads(blob[start : start + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataCorruptionError(f"corrupt PACE message header: {exc}") from None
    if not isinstance(entries, list):
        raise DataCorruptionError("corrupt PACE message header: not a list of entries")
    return entries, start + hlen


def deserialize(blob: bytes) -> dict[str, Carrier]:
    """Parse :func:`serialize` output back into carriers (CPU float32 tensors)."""
    entries, offset = read_header(blob, len(blob))
    out: dict[str, Carrier] = {}

    def take(shape: tuple[int, ...]) -> Tensor:
        nonlocal offset
        count = int(np.prod(shape, dtype=np.int64))
        end = offset + 4 * count
        if end > len(blob):
            raise DataCorruptionError("truncated PACE message payload")
        arr = np.frombuffer(blob, dtype="<f4", count=count, offset=offset).reshape(shape)
        offset = end
        return torch.from_numpy(arr.astype(np.float32))

    for name, kind, shape, rank in entries:
        shape = tuple(int(s) for s in shape)
        if kind == "dense":
            out[name] = Carrier(shape=shape, dense=take(shape))
        elif kind == "lowrank":
            out[name] = Carrier(shape=shape, left=take((shape[0], rank)), right=take((shape[1], rank)))
        else:
            raise DataCorruptionError(f"unknown carrier kind {kind!r} in PACE message")
    if offset != len(blob):
        raise DataCorruptionError(f"PACE message has {len(blob) - offset} trailing bytes")
    return out


def payload_bytes(carriers: Mapping[str, Carrier]) -> int:
    """float32 payload bytes of one (unbatched) message."""
    return 4 * sum(c.num_floats() for c in carriers.values())


def framing_bytes(carriers: Mapping[str, Carrier]) -> int:
    """Bytes of a serialized message that are not float payload (magic, length, header)."""
    return len(MAGIC) + _LEN.size + len(_header(carriers))


def dense_model_bytes(params: Mapping[str, Tensor], batch_dims: int = 0) -> int:
    """float32 bytes of the dense model (per model when ``batch_dims`` leading axes are given)."""
    return 4 * sum(int(np.prod(t.shape[batch_dims:], dtype=np.int64)) for t in params.values())
