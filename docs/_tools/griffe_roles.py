"""A griffe extension: the package's reST-flavoured docstrings, rendered as Markdown.

The docstrings are written for ``help()`` as much as for the site: they use Sphinx roles
(``:class:`Sandbox```) and end a paragraph with ``::`` before an indented example. Markdown
knows neither, so the API pages would show them raw. This turns a role into a link to the
documented public name when there is one (``[`Sandbox`][churn_connector.Sandbox]``), else
into a code span, and ``::`` into ``:`` (the indented block already renders as code).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):`~?([\w.]+?)(?:\(\))?`")
# "text::" at the end of a line, before an indented block: reST's literal-block marker
LITERAL = re.compile(r"(\S)::$", re.MULTILINE)

# the modules whose __all__ the API pages document, most specific first
PUBLIC_MODULES = ("churn_connector.airflow", "churn_connector.spark", "churn_connector")


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "churn_connector":
            return
        exports = {path: _exports(pkg, path) for path in PUBLIC_MODULES}
        for obj in _walk(pkg):
            if obj.docstring is not None:
                home = next(p for p in PUBLIC_MODULES if obj.path.startswith(p))
                scopes = [(home, exports[home]), ("churn_connector", exports["churn_connector"])]
                obj.docstring.value = markdown(obj.docstring.value, scopes)


def _exports(pkg: griffe.Module, path: str) -> set[str]:
    module = pkg if path == pkg.path else pkg.get_member(path.removeprefix(pkg.path + "."))
    return {str(name) for name in module.exports or ()}


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            found.extend(_walk(member))
    return found


def markdown(text: str, scopes: list[tuple[str, set[str]]]) -> str:
    """``text`` with roles as links (or code spans) and ``::`` as ``:``."""

    def role(match: re.Match[str]) -> str:
        target = match.group(1)
        for module, names in scopes:
            name = target.removeprefix(module + ".")
            if name.split(".", 1)[0] in names:
                return f"[`{name}`][{module}.{name}]"
        return f"`{target.rsplit('.', 1)[-1]}`"

    return LITERAL.sub(r"\1:", ROLE.sub(role, text))
