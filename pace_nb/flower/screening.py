"""What the server checks in every client message before using it: it trusts no client.

Identity is the node the server addressed: a node's partition id is bound once, from its
upload report (an integer in ``[0, K)`` that no other node claims and, when the server holds the
federation's :class:`FederationManifest`, whose credential matches the one assigned to that partition),
and every later message of that node must agree with it. Every field is checked for type, shape,
finiteness and magnitude against what the server knows (the public view: F, C, each client's node
and test-node counts; each method's declared upload layout and bounds), payload sizes before any parsing. A failed check raises :class:`Invalid` with the reason; the server
excludes that client (reported beside the dropped ones) and runs on with the others.
Pure functions; no Flower import.
"""
from __future__ import annotations

import hashlib
import hmac
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

import torch

from pace_nb.flower import wire
from pace_nb.methods.pace import lowrank
from pace_nb.methods.phases import PublicView

#: Most classes a report may declare (the confusion matrices it sends are C × C).
MAX_CLASSES = 4096
#: Most test nodes a report may declare when the server knows no node counts (no public view).
MAX_TEST_NODES = 1 << 24
#: Longest upload header (PACE's wire format) parsed at all.
MAX_HEADER_BYTES = 1 << 20
#: Federation fields a client's upload carries, and their types: the public facts a row's
#: federation columns are built from (:func:`~pace_nb.methods.evaluation.federation_fields`).
FEDERATION_FIELDS = {"dataset": str, "scheme": str, "seed": int, "num_clients": int, "num_features": int,
                     "beta": float}
#: Fields absent (None) where they do not apply: ``beta``, the Dirichlet concentration, a
#: finite number > 0 of a Dirichlet partition only.
OPTIONAL_FIELDS = frozenset({"beta"})


class Invalid(Exception):
    """A client message failed a check; the message says which field and why."""


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{field} is {type(value).__name__} {str(value)[:40]!r}, not an integer")
    if not lo <= value <= hi:
        raise Invalid(f"{field} = {value} outside [{lo}, {hi}]")
    return value


def _seconds(report: dict, field: str) -> None:
    if field in report:
        v = report[field]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise Invalid(f"{field} = {str(v)[:40]!r} is not a finite duration >= 0")


def partition_id(report: Any, num_clients: int) -> int:
    """The partition id a node claims in its upload report: an integer in ``[0, K)``."""
    if not isinstance(report, dict) or "partition_id" not in report:
        raise Invalid("the reply carries no report with a partition_id")
    return _int(report["partition_id"], "partition_id", 0, num_clients - 1)


def upload_report(report: dict) -> int:
    """Upload report fields → the declared number of classes."""
    if "num_classes" not in report:
        raise Invalid("the upload report lacks num_classes")
    for field in ("train_seconds", "upload_seconds"):
        _seconds(report, field)
    return _int(report["num_classes"], "num_classes", 2, MAX_CLASSES)


def federation(fed: Any) -> tuple:
    """The federation facts of an upload (dataset, scheme, seed, K, F, beta or None), typed and bounded."""
    if not isinstance(fed, dict):
        raise Invalid("the upload carries no federation record")
    out: list[Any] = []
    for field, kind in FEDERATION_FIELDS.items():
        v = fed.get(field)
        if v is None and field in OPTIONAL_FIELDS:
            out.append(None)
            continue
        if isinstance(v, bool) or not isinstance(v, kind) or (isinstance(v, str) and len(v) > 256):
            raise Invalid(f"federation field {field} is {type(v).__name__} {str(v)[:40]!r}, not a {kind.__name__}")
        if isinstance(v, float) and not (math.isfinite(v) and v > 0):
            raise Invalid(f"federation field {field} = {v} is not a finite number > 0")
        out.append(v)
    return tuple(out)


def optional_beta(value: Any) -> float | None:
    """A federation's ``beta`` as its facts carry it: None where the partition has none."""
    return None if value is None else float(value)


@dataclass(frozen=True)
class FederationManifest:
    """What the server knows of the federation before any upload (``federation.json``, no data):
    its facts, each client's node and test-node counts and the sha256 of each partition's credential.
    Its :attr:`view` is the :class:`~pace_nb.methods.phases.PublicView` a method's hooks read."""

    federation: tuple
    num_classes: int
    num_nodes: tuple[int, ...]
    credentials: tuple[str, ...]
    num_test: tuple[int, ...]

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> FederationManifest:
        cfg = meta.get("config") or {}
        fed = (meta["dataset"], str(cfg.get("scheme", "")), int(cfg.get("seed", -1)), int(meta["num_clients"]),
               int(meta["num_features"]), optional_beta(cfg.get("beta")))
        nodes, creds = tuple(meta.get("num_nodes") or ()), tuple(meta.get("credentials") or ())
        tests = tuple(meta.get("num_test") or ())
        if len(nodes) != fed[3] or len(creds) != fed[3] or len(tests) != fed[3]:
            raise ValueError("federation.json lacks the clients' node or test-node counts or credentials (export it again)")
        return cls(fed, int(meta["num_classes"]), tuple(int(n) for n in nodes), tuple(str(c) for c in creds),
                   tuple(int(n) for n in tests))

    @property
    def num_features(self) -> int:
        return int(self.federation[4])

    @property
    def view(self) -> PublicView:
        """The public view of :mod:`pace_nb.methods.phases` (counts only: no identity, no credentials)."""
        return PublicView(self.num_features, self.num_classes, len(self.num_nodes), self.num_nodes, self.num_test)


def credential(fed: Any, pid: int, view: FederationManifest) -> None:
    """The upload's credential must be the one assigned to partition ``pid`` (a claim of an id
    that is not the node's is refused)."""
    token = fed.get("credential") if isinstance(fed, dict) else None
    if not isinstance(token, bytes) or not hmac.compare_digest(hashlib.sha256(token).hexdigest(),
                                                               view.credentials[pid]):
        raise Invalid(f"partition_id {pid} is not assigned to this node (its credential does not match)")


def public_facts(fed: tuple, num_classes: int, view: FederationManifest) -> None:
    """An upload's federation facts and class count must be the public view's."""
    if fed != view.federation or num_classes != view.num_classes:
        raise Invalid(f"federation {fed} with num_classes {num_classes} is not the server's {view.federation} "
                      f"with {view.num_classes}")


def payload(data: Any, limit: int) -> bytes:
    """Upload bytes, refused above ``limit`` before any parsing."""
    if not isinstance(data, bytes):
        raise Invalid(f"the upload payload is {type(data).__name__}, not bytes")
    if len(data) > limit:
        raise Invalid(f"the upload is {len(data)} bytes, above the limit of {limit} (max_upload_bytes)")
    return data


def _malformed(method: str, exc: Exception) -> Invalid:
    return Invalid(f"malformed {method} upload ({type(exc).__name__}: {str(exc)[:120]})")


def header(data: bytes, method: str) -> list:
    """The header entries of an upload in PACE's wire format, and the upload's size checked
    against them, before any payload is decoded."""
    try:
        entries, _ = lowrank.read_header(data, MAX_HEADER_BYTES)
        if not all(isinstance(e, list) and len(e) == 4 and isinstance(e[0], str) for e in entries):
            raise ValueError("header entries are not [name, kind, shape, rank]")
        names = [e[0] for e in entries]
        if len(set(names)) != len(names):
            raise ValueError("a tensor name appears twice")
        size = lowrank.message_size(entries)
    except Exception as exc:
        raise _malformed(method, exc) from None
    if size != len(data):
        raise Invalid(f"{method} upload is {len(data)} bytes; its header describes {size}")
    return entries


def carriers(data: bytes, method: str, bounds: Mapping[str, list[tuple[float, float]]] | float) -> dict:
    """Decode an upload whose header was checked → its carriers, every tensor finite and within
    ``bounds`` (per carrier, a (low, high) per wire tensor; or one magnitude for all)."""
    try:
        out = lowrank.deserialize(data)
    except Exception as exc:
        raise _malformed(method, exc) from None
    if not out:
        raise Invalid(f"empty {method} upload")
    for name, c in out.items():
        for i, t in enumerate(c.tensors()):
            if not bool(torch.isfinite(t).all()):
                raise Invalid(f"{method} upload tensor {name} holds NaN/inf")
            lo, hi = (-bounds, bounds) if isinstance(bounds, (int, float)) else bounds[name][i]
            if t.numel() and (float(t.min()) < lo or float(t.max()) > hi):
                raise Invalid(f"{method} upload tensor {name} has values in [{float(t.min()):.3g}, {float(t.max()):.3g}], "
                              f"outside what a real client sends [{lo:.3g}, {hi:.3g}]")
    return out


def _differences(got: Mapping[str, tuple], want: Mapping[str, tuple]) -> list[str]:
    """How an upload's tensors ``got`` differ from one declared layout ``want`` (name → shape; a
    dimension ``None`` is any size, a string any size the same wherever that string stands)."""
    sizes: dict[str, int] = {}

    def fits(shape: tuple | None, spec: tuple) -> bool:
        if shape is None or len(shape) != len(spec):
            return False
        for d, g in zip(spec, shape, strict=True):
            if isinstance(d, str):
                d = sizes.setdefault(d, g)
            if d is not None and d != g:
                return False
        return True

    def show(spec: tuple) -> tuple:
        return tuple("*" if d is None else d for d in spec)

    bad = [f"{n} {got.get(n)} (expected {show(spec)})" for n, spec in want.items() if not fits(got.get(n), spec)]
    return bad + [f"unexpected {n}" for n in got if n not in want]


def carriers_header(data: bytes, method: str, allow_empty: bool = False, bound: float = math.inf,
                    shapes: Mapping[str, tuple] | Sequence[Mapping[str, tuple]] | None = None) -> tuple:
    """A one-shot upload in PACE's wire format: header and size (:func:`header`), the tensors the
    method declares (``shapes``: name → shape, ``None`` a free size, a string a free size shared by
    the tensors naming it; or several such layouts, one of which must match), then every tensor
    finite and within ``bound`` → its header (name, kind, shape, rank); ``()`` for an allowed empty upload."""
    if allow_empty and not data:
        return ()
    entries = header(data, method)
    if any(kind != "dense" for _, kind, _, _ in entries):
        raise Invalid(f"{method} upload holds a carrier that is not dense")
    if shapes is not None:
        got = {n: tuple(s) for n, _, s, _ in entries}
        layouts = [shapes] if isinstance(shapes, Mapping) else list(shapes)
        diffs = sorted((_differences(got, want) for want in layouts), key=len)
        if diffs[0]:
            raise Invalid(f"{method} upload tensors differ from what the method sends: {'; '.join(diffs[0])[:300]}")
    carriers(data, method, bound)
    return tuple((n, k, tuple(s), r) for n, k, s, r in entries)


def pace_header(data: bytes, layout: list | None = None, bounds: Mapping | None = None) -> tuple:
    """A PACE upload: its header must be ``layout`` (:func:`~pace_nb.methods.pace.protocol.upload_layout`,
    derived from the public facts) and its size the header's, before any payload is decoded; then every
    tensor finite and within ``bounds`` (:func:`~pace_nb.methods.pace.protocol.upload_bounds`)."""
    entries = header(data, "PACE")
    if layout is not None and entries != layout:
        got, want = {e[0]: e[1:] for e in entries}, {e[0]: e[1:] for e in layout}
        diff = ([f"{n} {got.get(n)} (expected {w})" for n, w in want.items() if got.get(n) != w]
                + [f"unexpected {n}" for n in got if n not in want]) or ["tensor order"]
        raise Invalid(f"PACE upload layout differs from the federation's: {'; '.join(diff)[:300]}")
    carriers(data, "PACE", bounds if bounds is not None else math.inf)
    return tuple((n, k, tuple(s), r) for n, k, s, r in entries)


def spear_tensors(data: bytes, num_classes: int, num_features: int | None = None,
                  max_count: int = MAX_TEST_NODES) -> tuple[torch.Tensor, torch.Tensor]:
    """Parse a SPEAR upload (members, integer counts and shapes from the headers first) → ``(p [C, F], n [C])``:
    prototypes finite with L2 norm at most :data:`~pace_nb.methods.spear.core.MAX_PROTOTYPE_NORM`,
    counts summing to at most ``max_count`` (the client's node count)."""
    from pace_nb.methods.spear.core import MAX_PROTOTYPE_NORM

    try:
        p, n = wire.spear_upload_tensors(data, num_classes, num_features)
    except Exception as exc:
        raise _malformed("SPEAR", exc) from None
    if not bool(torch.isfinite(p).all()):
        raise Invalid("SPEAR prototypes hold NaN/inf")
    norm = float(p.norm(dim=1).max()) if p.numel() else 0.0
    if norm > MAX_PROTOTYPE_NORM * (1 + 1e-4):
        raise Invalid(f"a SPEAR prototype has L2 norm {norm:.3g}; a prototype of unit-norm rows has at most "
                      f"{MAX_PROTOTYPE_NORM:g}")
    if int(n.sum()) > max_count:
        raise Invalid(f"SPEAR class counts sum to {int(n.sum())}, above the client's {max_count} nodes")
    return p, n


def upload(data: bytes, spec: Any, num_classes: int, method: str) -> Any:
    """One upload screened as the method's :class:`~pace_nb.methods.phases.UploadSpec` says → its
    parsed form: a carriers header (:func:`pace_header` for a fixed one, else :func:`carriers_header`) or SPEAR's ``(p, n)`` (:func:`spear_tensors`)."""
    if spec.wire == "prototypes":
        return spear_tensors(data, num_classes, spec.num_features,
                             MAX_TEST_NODES if spec.max_count is None else spec.max_count)
    if spec.fixed:  # one header for every client, carriers of any kind (PACE's)
        return pace_header(data, spec.header, spec.bounds if spec.header is not None else None)
    return carriers_header(data, method, allow_empty=spec.empty_ok, bound=spec.bounds, shapes=spec.shapes)


def agreement(parsed: Any, spec: Any) -> Any:
    """What every honest upload shares, compared with the majority's (None: nothing to compare):
    SPEAR's prototype width (an empty upload has none); a fixed header whole; else, without declared
    shapes, the tensor names and their numbers of dimensions (sizes may depend on a client's data)."""
    if spec.wire == "prototypes":
        p, n = parsed
        return p.shape[1] if bool((n > 0).any()) else None
    if spec.fixed:
        return parsed
    if spec.shapes is not None or not parsed:
        return None
    return tuple((n, k, len(s)) for n, k, s, _ in parsed)


def final_report(report: Any, bound: int, num_classes: int, has_local: bool, max_test: int = MAX_TEST_NODES) -> dict:
    """A receive report: same partition id as the node's upload, ``n_test`` at most ``max_test``
    (the client's published test-node count) before any count is expanded, count matrices, α in [0, 1]."""
    if not isinstance(report, dict):
        raise Invalid("the reply carries no report")
    if report.get("partition_id") != bound:
        raise Invalid(f"reports partition_id {str(report.get('partition_id'))[:40]!r} but uploaded as {bound}")
    try:
        out = wire.check_report(report, num_classes, "report", has_local=has_local)
    except Exception as exc:
        raise Invalid(str(exc)) from None
    if isinstance(out["n_test"], bool):
        raise Invalid("n_test is not a count")
    if out["n_test"] > max_test:
        raise Invalid(f"n_test = {out['n_test']} is above the client's {max_test} test nodes")
    if has_local:
        rows = {key: tuple(sum(out[key][i * num_classes:(i + 1) * num_classes]) for i in range(num_classes))
                for key in wire.REPORT_KEYS[2:]}
        if len(set(rows.values())) != 1:
            raise Invalid("the final, Local and External confusion matrices count different test labels")
        a = out.get("alpha")
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= float(a) <= 1.0:
            raise Invalid(f"alpha = {str(a)[:40]!r} is not a number in [0, 1]")
    _seconds(out, "receive_seconds")
    return out


def majority(values: Iterable) -> Any:
    """The most common value (ties: the first seen) — what the honest majority agrees on."""
    return Counter(values).most_common(1)[0][0]
