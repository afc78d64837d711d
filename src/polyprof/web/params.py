"""Query parameters of the JSON API: the ``Options`` fields by name, plus each endpoint's own.

Every analysis endpoint takes the fields of
:class:`~polyprof.analysis.options.Options` under their library names
(``sample_index``, ``focus``, ``time_range`` ...), parsed by the field's
type: integers, ``1``/``0`` (or ``true``/``false``) switches, comma lists
for ``pid``/``tid``, ``START:END`` with units for ``time_range``; an empty
value means "not set". Endpoint parameters (``root``, ``search`` ...) are
declared with a type and a default. Anything else, or a value that does not
parse, is an :class:`~polyprof.errors.OptionsError` naming the parameter,
which the server answers with status 400 and the message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from polyprof.analysis.options import Options, parse_time_range
from polyprof.errors import OptionsError

__all__ = ["OPTION_NAMES", "Param", "Query", "parse_bool"]

OPTION_NAMES = tuple(f.name for f in dataclasses.fields(Options))
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def parse_bool(name: str, text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise OptionsError(f"{{{name}}}={text!r}: expected 1 or 0", options=(name,))


def _int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise OptionsError(f"{{{name}}}={text!r}: expected an integer", options=(name,)) from None


def _float(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise OptionsError(f"{{{name}}}={text!r}: expected a number", options=(name,)) from None


def _int_set(name: str, text: str) -> frozenset[int]:
    return frozenset(_int(name, x.strip()) for x in text.split(",") if x.strip())


def _index(name: str, text: str) -> str | int:
    return int(text) if text.strip().isdigit() else text


def _time_range(name: str, text: str) -> tuple[int | None, int | None]:
    return parse_time_range(text)


def _text(name: str, text: str) -> str:
    return text


_BY_TYPE: dict[str, Callable[[str, str], Any]] = {
    "int": _int, "int | None": _int, "bool": parse_bool, "float": _float, "str": _text,
    "str | int | None": _index, "frozenset[int] | None": _int_set,
    "tuple[int | None, int | None] | None": _time_range,
}


def _option_parser(f: dataclasses.Field) -> Callable[[str, str], Any]:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "str")
    return _BY_TYPE.get(kind, _text)


_OPTION_PARSERS = {f.name: _option_parser(f) for f in dataclasses.fields(Options)}


@dataclass(frozen=True)
class Param:
    """An endpoint parameter: its type (``int``, ``float``, ``bool``, ``str``), default and help."""

    kind: str
    default: Any
    help: str


class Query:
    """The parsed parameters of one request: ``options`` (an Options) and ``get(name)``."""

    def __init__(self, raw: Mapping[str, list[str]], params: Mapping[str, Param], *, options: bool = True) -> None:
        known = set(params) | (set(OPTION_NAMES) if options else set())
        unknown = sorted(set(raw) - known)
        if unknown:
            raise OptionsError(f"unknown parameter(s) {', '.join(unknown)}; this endpoint takes: "
                               f"{', '.join(sorted(known))}")
        self._values: dict[str, Any] = {}
        for name, spec in params.items():
            text = raw.get(name, [None])[-1]
            self._values[name] = spec.default if text is None or (text == "" and spec.kind != "str") \
                else _BY_TYPE[spec.kind](name, text)
        fields: dict[str, Any] = {}
        for name in OPTION_NAMES if options else ():
            text = raw.get(name, [""])[-1]
            if text != "":
                fields[name] = _OPTION_PARSERS[name](name, text)
        self.options = Options(**fields)

    def get(self, name: str) -> Any:
        return self._values[name]
