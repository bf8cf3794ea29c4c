"""Names a package offers without importing their modules until first use.

A room's face (its ``__init__``) names everything other rooms may use; a name whose module
is heavy, or pulls in an optional dependency, is listed here instead of imported, so that
``import churn_connector`` stays as quick as before. The face imports such names under
``TYPE_CHECKING`` too, for type checkers and editors.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__``: each name of ``modules`` (name -> its module,
    relative to ``package``) imported on first use, then kept in the package."""

    def __getattr__(name: str) -> Any:
        where = modules.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
