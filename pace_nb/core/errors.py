"""User-facing errors: one line, actionable, no traceback from ``pace-nb``."""
from __future__ import annotations

from collections.abc import Iterable


class PaceNBError(Exception):
    """Base class of every error a user can cause; the CLI prints its message only."""


class UnknownNameError(PaceNBError, ValueError):
    """An unknown dataset, method, partition scheme, variant … name."""


class MissingDataError(PaceNBError, FileNotFoundError):
    """Raw files are absent and cannot be downloaded (offline)."""


class ConfigError(PaceNBError, ValueError):
    """An impossible or inconsistent parameter (K, rank, beta, masks, config file …)."""


class PluginError(ConfigError):
    """A plugin module (an entry point, ``--plugin``, ``$PACE_NB_PLUGINS``) that failed to load."""


class DataCorruptionError(PaceNBError, RuntimeError):
    """A cache or results file failed its checksum / schema check."""


class NumericalError(PaceNBError, ArithmeticError):
    """Training produced non-finite losses or weights (diverged); nothing is stored."""


class MethodError(PaceNBError, RuntimeError):
    """A registered method (e.g. a plugin) raised or returned no or invalid result rows; its
    cell is not stored."""


class StorageError(PaceNBError, OSError):
    """A file could not be written (disk full, quota, read-only or failing disk); the file it would
    have replaced is unchanged."""


class BusyError(PaceNBError, RuntimeError):
    """A file is being written by another process (it is not corrupted): retry later."""


def unknown(kind: str, name: object, valid: Iterable[str]) -> UnknownNameError:
    """Build an :class:`UnknownNameError` that lists the valid names."""
    valid = sorted(valid, key=str.lower)
    return UnknownNameError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(valid)}")


class RuntimeStartError(PaceNBError, RuntimeError):
    """A runtime the run needs (Ray, Flower's simulation engine) did not start; the message names
    the machine's load, the usual cause on a busy machine."""
