"""Optional dependencies: import one, or fail with one line naming the extra that provides it."""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from pace_nb.core.errors import ConfigError


def missing_extra_message(module: str, extra: str, feature: str) -> str:
    """The one-line explanation used whenever ``module`` (from extra ``extra``) is absent."""
    return (f"{feature} needs the Python package {module!r}, which is not installed; it comes with the "
            f"optional '{extra}' extra: pip install 'pace_nb[{extra}]' (from a checkout: pip install -e '.[{extra}]')")


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module``; when it is absent raise :class:`ConfigError` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(missing_extra_message(module.split(".")[0], extra, feature)) from None


def check_installed(modules: tuple[str, ...], extra: str, feature: str) -> None:
    """Raise :class:`ConfigError` naming ``extra`` unless every module is importable (nothing is imported)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ConfigError(missing_extra_message(module, extra, feature))
