"""What travels in the Flower messages: record names, message types and the byte payloads.

Every payload is the byte string the in-process protocol produces, carried unchanged as one
``bytes`` value of a Flower ``ConfigRecord``:

* PACE upload: :func:`pace_nb.methods.pace.protocol.upload` (``PACEMSG1`` carriers + sketches);
  PACE return: one message of :func:`pace_nb.methods.pace.protocol.server` per receiver;
* SPEAR upload: :func:`pace_nb.methods.spear.core.serialize_upload` (NPZ: classes, counts,
  prototypes; empty for a client holding no class);
* one-shot baselines: :func:`pace_nb.methods.oneshot.base.encode` (PACE's wire format, dense
  float32 tensors; empty for a client without training nodes).

Reports (a ``MetricRecord``) carry only aggregates: α, test-node counts and the test
confusion matrices (C × C, row = label) of the Local, External and final predictions.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pace_nb.core.errors import DataCorruptionError

#: Message types (``<category>.<action>``, routed by the ClientApp; the method is in the settings).
UPLOAD = "train.upload"
RECEIVE = "evaluate.receive"
#: Record and key names.
CONFIG, PAYLOAD, REPORT = "config", "payload", "report"
BLOB = "bytes"
#: Keys of a report (SPEAR reports carry no Local/External confusion).
REPORT_KEYS = ("partition_id", "n_test", "confusion_final", "confusion_local", "confusion_external")


def blob(record) -> bytes:
    """The byte payload of a received ``ConfigRecord`` (clear error when absent or not bytes)."""
    value = record.get(BLOB) if record is not None else None
    if not isinstance(value, bytes):
        raise DataCorruptionError(f"message carries no byte payload under {BLOB!r} "
                                  f"(got {type(value).__name__})")
    return value


def _npz_members(data: bytes, members: dict[str, str]) -> dict[str, tuple]:
    """The shapes of an NPZ's arrays from their headers alone, each of the declared dtype; exactly
    the declared members (nothing is decompressed or read beyond the headers)."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = sorted(zf.namelist())
        if names != sorted(f"{m}.npy" for m in members):
            raise DataCorruptionError(f"members {names[:8]} are not {sorted(members)}")
        shapes = {}
        for m, dtype in members.items():
            with zf.open(f"{m}.npy") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dt = read(f)  # the header only
            if dt.str != dtype or fortran:
                raise DataCorruptionError(f"{m} is {dt.str}{' (Fortran order)' if fortran else ''}, not {dtype}")
            shapes[m] = tuple(shape)
    return shapes


def spear_upload_tensors(data: bytes, num_classes: int, num_features: int | None = None) -> tuple[Tensor, Tensor]:
    """Parse a SPEAR upload into ``(p [C, F] float32, n [C] long)``; absent classes zero.
    An empty upload (a client holding no class) is ``(p [C, 0], n = 0)``. The members, their
    dtypes (:data:`~pace_nb.methods.spear.core.UPLOAD_MEMBERS`: integer counts) and shapes (at most
    C classes, ``num_features`` wide when given) are checked from the headers before any array is read."""
    from pace_nb.methods.spear.core import UPLOAD_MEMBERS, parse_upload

    if not data:
        return torch.zeros(num_classes, 0), torch.zeros(num_classes, dtype=torch.long)
    try:
        shapes = _npz_members(data, UPLOAD_MEMBERS)
    except Exception as exc:  # any parse failure is a corrupt message
        raise DataCorruptionError(f"corrupt SPEAR upload: {exc}") from None
    m = shapes["classes"][0] if len(shapes["classes"]) == 1 else -1
    width = shapes["prototypes"][1] if len(shapes["prototypes"]) == 2 else -1
    if (not 0 <= m <= num_classes or shapes["counts"] != (m,) or shapes["prototypes"] != (m, width)
            or (num_features is not None and width != num_features)):
        raise DataCorruptionError(f"malformed SPEAR upload: shapes {shapes} for {num_classes} classes"
                                  + (f" and {num_features} features" if num_features is not None else ""))
    try:
        return parse_upload(data, num_classes)
    except Exception as exc:  # any parse failure is a corrupt message
        raise DataCorruptionError(f"corrupt SPEAR upload: {exc}") from None


def confusion(y: Tensor, pred: Tensor, num_classes: int) -> list[int]:
    """Flattened C × C confusion counts (row = label, column = prediction)."""
    idx = y.long().cpu() * num_classes + pred.long().cpu()
    return torch.bincount(idx, minlength=num_classes * num_classes).tolist()


def pairs(conf: Any, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, predictions) with the confusion counts (order-free metrics only)."""
    counts = np.asarray(conf, dtype=np.int64).reshape(num_classes, num_classes)
    cells = np.repeat(np.arange(num_classes * num_classes), counts.reshape(-1))
    return cells // num_classes, cells % num_classes


def check_report(report, num_classes: int, who: str, has_local: bool = True) -> dict[str, Any]:
    """A client's report as a dict, validated (keys, confusion sizes, counts; without Local/External matrices
    when not ``has_local``)."""
    if report is None:
        raise DataCorruptionError(f"{who} sent no {REPORT!r} record")
    out = dict(report)
    keys = REPORT_KEYS if has_local else REPORT_KEYS[:3]
    missing = [k for k in keys if k not in out]
    if missing:
        raise DataCorruptionError(f"{who}'s report lacks {missing}")
    if not isinstance(out["n_test"], int) or out["n_test"] < 0:
        raise DataCorruptionError(f"{who}'s n_test is not a count: {out['n_test']!r}")
    for key in keys[2:]:
        conf = out[key]
        if (not isinstance(conf, list) or len(conf) != num_classes ** 2
                or any(not isinstance(v, int) or v < 0 for v in conf) or sum(conf) != out["n_test"]):
            raise DataCorruptionError(f"{who}'s {key} is not a {num_classes}x{num_classes} count matrix "
                                      f"summing to n_test")
    return out
