"""What the server checks in every client message before using it: it trusts no client.

Identity is the node the server addressed: a node's partition id is bound once, from its
upload report (an integer in ``[0, K)`` that no other node claims), and every later message of
that node must agree with it. Every field is checked for type, shape and finiteness, payload
sizes before any parsing. A failed check raises :class:`Invalid` with the reason; the server
excludes that client (reported beside the dropped ones) and runs on with the others.
Pure functions; no Flower import.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any
from collections.abc import Iterable

import torch

from pace_nb.flower import wire
from pace_nb.methods.pace import lowrank

#: Most classes a report may declare (the confusion matrices it sends are C × C).
MAX_CLASSES = 4096
#: Federation fields a client's upload carries, and their types.
FEDERATION_FIELDS = {"dataset": str, "scheme": str, "seed": int, "num_clients": int, "num_features": int}


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
    """The federation facts of an upload (dataset, scheme, seed, K), typed and bounded."""
    if not isinstance(fed, dict):
        raise Invalid("the upload carries no federation record")
    out = []
    for field, kind in FEDERATION_FIELDS.items():
        v = fed.get(field)
        if isinstance(v, bool) or not isinstance(v, kind) or (isinstance(v, str) and len(v) > 256):
            raise Invalid(f"federation field {field} is {type(v).__name__} {str(v)[:40]!r}, not a {kind.__name__}")
        out.append(v)
    return tuple(out)


def payload(data: Any, limit: int) -> bytes:
    """Upload bytes, refused above ``limit`` before any parsing."""
    if not isinstance(data, bytes):
        raise Invalid(f"the upload payload is {type(data).__name__}, not bytes")
    if len(data) > limit:
        raise Invalid(f"the upload is {len(data)} bytes, above the limit of {limit} (max_upload_bytes)")
    return data


def carriers_header(data: bytes, method: str, allow_empty: bool = False) -> tuple:
    """Parse an upload in PACE's wire format (PACE, every one-shot baseline) and check every
    tensor is finite → its header (name, kind, shape, rank); ``()`` for an allowed empty upload."""
    if allow_empty and not data:
        return ()
    try:
        carriers = lowrank.deserialize(data)
    except Exception as exc:
        raise Invalid(f"malformed {method} upload ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not carriers:
        raise Invalid(f"empty {method} upload")
    for name, c in carriers.items():
        for t in (c.dense, c.left, c.right):
            if t is not None and not bool(torch.isfinite(t).all()):
                raise Invalid(f"{method} upload tensor {name} holds NaN/inf")
    return tuple((n, c.kind, tuple(c.shape), c.rank) for n, c in carriers.items())


def pace_header(data: bytes) -> tuple:
    """A PACE upload's header (:func:`carriers_header`; an empty upload is invalid)."""
    return carriers_header(data, "PACE")


def spear_tensors(data: bytes, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Parse a SPEAR upload: finite prototypes, counts → ``(p [C, F], n [C])``."""
    try:
        p, n = wire.spear_upload_tensors(data, num_classes)
    except Exception as exc:
        raise Invalid(f"malformed SPEAR upload ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not bool(torch.isfinite(p).all()):
        raise Invalid("SPEAR prototypes hold NaN/inf")
    if bool((n > 2**40).any()):
        raise Invalid("SPEAR class counts are implausibly large")
    return p, n


def final_report(report: Any, bound: int, num_classes: int, has_local: bool) -> dict:
    """A receive report: same partition id as the node's upload, count matrices, α in [0, 1]."""
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
