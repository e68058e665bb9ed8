"""Options shared by several commands, parsed one way everywhere (no heavy imports here).

Lists are written comma-separated (``--seeds 2024,2025,2026``); the space-separated form
(``--seeds 2024 2025 2026``) is accepted too, so old command lines keep working.
"""
from __future__ import annotations

from collections.abc import Iterable

from pace_nb.core.errors import ConfigError


def split_list(values: str | Iterable[str]) -> list[str]:
    """The items of a list option: every value split at commas, blanks dropped."""
    parts = [values] if isinstance(values, str) else list(values)
    return [t.strip() for v in parts for t in str(v).replace(" ", ",").split(",") if t.strip()]


def int_list(values: str | Iterable[str], option: str) -> list[int]:
    """Integers of a list option (``--seeds 1,2,3``); anything else is one ConfigError line."""
    items = split_list(values)
    try:
        out = [int(t) for t in items]
    except ValueError:
        raise ConfigError(f"{option} takes integers separated by commas (e.g. {option} 2024,2025), "
                          f"got {','.join(items)!r}") from None
    if not out:
        raise ConfigError(f"{option} needs at least one value")
    return out


def add_seeds(parser, default: Iterable[int], what: str) -> None:
    """``--seeds`` with the one list syntax (comma-separated; spaces accepted)."""
    listed = ",".join(map(str, default))
    parser.add_argument("--seeds", nargs="+", default=[listed], metavar="S[,S...]",
                        help=f"{what}, comma separated (default {listed})")


def interrupted_note(saved: str | None) -> str:
    """The Ctrl-C line: what was kept (``saved``), or that nothing was."""
    return f"interrupted; {saved}" if saved else "interrupted; nothing was saved"
