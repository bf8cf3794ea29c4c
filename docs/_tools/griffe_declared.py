"""A griffe extension: an option's default, not its declaration, in its class's signature.

Options are dataclass fields declared with ``declare(default, doc=..., help=...)``
(``churn_connector/_core/declarations.py``). griffe's dataclass support reads the defaults of
``dataclasses.field(...)`` only, so the API pages would show each keyword's whole declaration
as its default (``naive_timezone: str | None = declare(None, doc="...", ...)``). This puts
the default there instead: ``declare``'s first argument, or ``factory()`` for
``default_factory=factory``.
"""

from __future__ import annotations

from typing import Any

import griffe

DECLARE = "churn_connector._core.declarations.declare"


class DeclaredDefaults(griffe.Extension):
    """Rewrites the fields' values of the package's classes once it is loaded, before the
    dataclasses extension (griffe runs its built-in extensions after the configured ones)
    makes the ``__init__`` signatures of them."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "churn_connector":
            return
        for cls in _classes(pkg):
            for member in cls.members.values():
                if isinstance(member, griffe.Attribute):
                    member.value = default_of(member.value)


def default_of(value: str | griffe.Expr | None) -> str | griffe.Expr | None:
    """The default that a ``declare(...)`` call stands for (anything else: itself)."""
    if not (isinstance(value, griffe.ExprCall) and value.canonical_path == DECLARE):
        return value
    for argument in value.arguments:
        if isinstance(argument, griffe.ExprKeyword):
            if argument.name == "default_factory" and isinstance(argument.value, griffe.Expr):
                return griffe.ExprCall(function=argument.value, arguments=[])
        else:
            return argument
    return None


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found = [obj] if isinstance(obj, griffe.Class) else []
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Module | griffe.Class):
            found.extend(_classes(member))
    return found
