"""polyprof: one toolkit for stack-sampling profiles.

Read any supported format into one columnar :class:`Profile`, analyse it,
and write it to another format::

    import polyprof
    profile = polyprof.read("cpu.pb.gz")
    report = polyprof.convert("trace.perfetto-trace", "out.pb.gz")

Heavy modules (numpy, protobuf) load on first use, so importing polyprof and
``polyprof --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "Label",
    "LossReport",
    "MalformedInputError",
    "OptionsError",
    "PolyprofError",
    "Profile",
    "ProfileBuilder",
    "ReadOptions",
    "UnrecognizedFormatError",
    "ValueType",
    "WriteOptions",
    "__version__",
    "convert",
    "detect",
    "dump",
    "read",
    "read_all",
    "write",
]

_LAZY = {
    "convert": "polyprof.api", "detect": "polyprof.api", "read": "polyprof.api",
    "read_all": "polyprof.api", "write": "polyprof.api",
    "Profile": "polyprof.model.profile", "Label": "polyprof.model.profile",
    "ValueType": "polyprof.model.profile", "ProfileBuilder": "polyprof.model.builder",
    "dump": "polyprof.model.dump", "LossReport": "polyprof.formats.loss",
    "ReadOptions": "polyprof.formats.options", "WriteOptions": "polyprof.formats.options",
    "InputError": "polyprof.errors", "MalformedInputError": "polyprof.errors",
    "OptionsError": "polyprof.errors", "PolyprofError": "polyprof.errors",
    "UnrecognizedFormatError": "polyprof.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'polyprof' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
