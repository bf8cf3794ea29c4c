"""Options declared once: each field of an options value says how people spell it.

An option is a field of a frozen dataclass (``TextFormat``, ``TableOptions``,
``EventOptions``, ``IdentityOptions``, ``SendOptions``, ``ClientConfig``): its name, type
hint and default are the field's. Its metadata, made with :func:`declare`, says the rest:
the line the docs' options page shows, the command line's flag (spelling, help, metavar,
how its text is read, whether it repeats), whether Spark's data source takes it, and which
kinds of table it applies to. The choices of a ``Literal`` hint are the flag's choices.

Everything else is derived from these fields: the command line's flags and their checks,
the names Spark and Airflow accept and how their text is read, the flags that messages name
(:data:`FLAGS`), the options page's tables, and the test that keeps the public signatures
(explicit keywords, for IDEs and type checkers) in step with the declarations.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import MISSING, field
from functools import cache
from typing import Any, Literal, TypeVar

from .types import KINDS, Kind

KEY = "churn_connector"  # the metadata key of a declaration
T = TypeVar("T")

# keyword of the Python calls -> the command line's flag for it (filled by ``registered``);
# messages name an option by it under the command line (``_core.words``)
FLAGS: dict[str, str] = {}


class Declared:
    """What one option says of itself beyond its name, type hint and default.

    A plain class, not a dataclass: ~60 of them are made as the package is imported, and
    making a dataclass type costs about a millisecond.
    """

    __slots__ = (
        "doc",
        "flag",
        "help",
        "kinds",
        "metavar",
        "parse",
        "repeat",
        "shown_default",
        "shown_flag",
        "spark",
    )

    def __init__(
        self,
        *,
        doc: str,  # the options page: one line, Markdown
        help: str | None = None,  # --help; set: the command line's flag is derived from it
        flag: str | None = None,  # the flag's spelling when not --<name-with-dashes>
        metavar: str | None = None,
        parse: Callable[[str], Any] | None = None,  # the flag's text -> value (else by hint)
        repeat: bool = False,  # the flag may be given again (values collected in a list)
        kinds: tuple[Kind, ...] = KINDS,  # the tables it applies to (a wing's own: its kind)
        spark: bool = True,  # a Spark data source option (False: meaningless for a frame)
        shown_default: str | None = None,  # the default as the options page says it
        shown_flag: str | None = None,  # the options page's command-line column, if special
    ) -> None:
        self.doc, self.help, self.flag, self.metavar = doc, help, flag, metavar
        self.parse, self.repeat, self.kinds, self.spark = parse, repeat, kinds, spark
        self.shown_default, self.shown_flag = shown_default, shown_flag

    def __repr__(self) -> str:
        return f"Declared({self.doc!r})"

    def flag_for(self, name: str) -> str | None:
        """The command line's spelling of option ``name`` (None: it has none).

        A flag without ``help`` is another option's, declared there with its help (the
        call's ``--concurrency`` sets what the client's ``max_concurrency`` would): the
        declaration names it for messages; the command line derives it from the other.
        """
        if self.flag is not None:
            return self.flag
        return "--" + name.replace("_", "-") if self.help is not None else None


def declare(default: Any = MISSING, *, default_factory: Any = MISSING, **declared: Any) -> Any:
    """A dataclass field with a default that declares an option (``declared``: the keywords
    of :class:`Declared`)."""
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta(**declared))
    return field(default=default, metadata=meta(**declared))


def meta(**declared: Any) -> dict[str, Declared]:
    """The metadata that declares an option, for a ``dataclasses.field`` of one's own (a
    field without a default, or with ``repr=False``)."""
    return {KEY: Declared(**declared)}


class Option:
    """One declared option, as the derivations see it (made when they first ask)."""

    __slots__ = ("annotation", "declared", "default", "name", "owner")

    def __init__(
        self, name: str, annotation: str, default: Any, declared: Declared, owner: type
    ) -> None:
        self.name = name
        self.annotation = annotation  # the hint as written (``"str | None"``)
        self.default = default
        self.declared = declared
        self.owner = owner  # the class that declares it

    def __repr__(self) -> str:
        return f"Option({self.owner.__name__}.{self.name})"

    @property
    def hint(self) -> Any:
        """The type hint, evaluated."""
        return hints(self.owner)[self.name]

    @property
    def flag(self) -> str | None:
        return self.declared.flag_for(self.name)

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """The values a ``Literal`` hint allows (None among them left out), else None."""
        found = literal_values(self.hint)
        return found or None

    def is_default(self, value: Any) -> bool:
        """``value`` is this option's default (a value of another type never is)."""
        default = self.default
        if value is default:
            return True
        if type(value) is not type(default):
            return False
        return bool(value == default)


@cache
def hints(cls: type) -> dict[str, Any]:
    """``cls``'s type hints, evaluated once."""
    return typing.get_type_hints(cls)


def literal_values(hint: Any) -> tuple[Any, ...]:
    """The values of the ``Literal`` types in ``hint`` (``Literal["a"] | None``: ``("a",)``)."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    found: tuple[Any, ...] = ()
    for arg in typing.get_args(hint):
        found += literal_values(arg)
    return found


def options_of(cls: type) -> tuple[Option, ...]:
    """The options ``cls`` declares (its own and its bases'), in field order."""
    found = _DECLARED.get(cls)
    if found is None:
        found = _DECLARED[cls] = _declared(cls)
    return found


_DECLARED: dict[type, tuple[Option, ...]] = {}


def _declared(cls: type) -> tuple[Option, ...]:
    found = []
    for f in dataclasses.fields(cls):
        declared = f.metadata.get(KEY)
        if declared is None:
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING  # a required field (ClientConfig's base_url and api_key)
        owner = next(c for c in cls.__mro__ if f.name in inspect.get_annotations(c))
        found.append(Option(f.name, str(f.type), default, declared, owner))
    return tuple(found)


def registered(cls: type[T]) -> type[T]:
    """Class decorator: record the flags of ``cls``'s options in :data:`FLAGS`.

    One name has one flag everywhere (``batch_size`` of the config and of a call alike);
    a second spelling is a mistake, refused when the class is made.
    """
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        declared = f.metadata.get(KEY)
        flag = None if declared is None else declared.flag_for(f.name)
        if flag is not None and FLAGS.setdefault(f.name, flag) != flag:
            raise TypeError(f"{cls.__name__}.{f.name}: flag {flag} differs from {FLAGS[f.name]}")
    return cls
