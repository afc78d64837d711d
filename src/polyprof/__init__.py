"""polyprof: one toolkit for stack-sampling profiles.

Read any supported format into one columnar :class:`Profile`, analyse it,
and write it to another format::

    import polyprof
    profile = polyprof.read("cpu.pb.gz")                  # a path, bytes or a binary file
    top = polyprof.top(profile, nodecount=10, focus="sha256")
    df = top.to_pandas()                                  # every result is plain data
    report = polyprof.convert("trace.perfetto-trace", "out.pb.gz")

Analyses (``top``, ``tree``, ``peek``, ``traces``, ``flame``, ``diff``,
``validate``, ``info``, ``filter``) take a profile, an optional
:class:`Options` and keyword overrides of its fields. Every name is
documented in docs/API.md. Heavy modules (numpy, protobuf, pandas, pyarrow)
load on first use, so importing polyprof and ``polyprof --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "DecompressionLimitError",
    "InputError",
    "Label",
    "LossReport",
    "MalformedInputError",
    "MissingDependencyError",
    "Options",
    "OptionsError",
    "OutputError",
    "PolyprofError",
    "PolyprofWarning",
    "Profile",
    "ProfileBuilder",
    "ReadOptions",
    "StoreError",
    "UnrecognizedFormatError",
    "UnsupportedFeatureError",
    "ValueType",
    "WriteOptions",
    "__version__",
    "convert",
    "detect",
    "diff",
    "dump",
    "filter",
    "flame",
    "from_arrow",
    "from_pandas",
    "info",
    "merge",
    "peek",
    "read",
    "read_all",
    "top",
    "traces",
    "tree",
    "validate",
    "write",
]

#: name -> (module, attribute); imported on first access.
_LAZY = {
    **{name: ("polyprof.api", name) for name in ("convert", "detect", "read", "read_all", "write")},
    **{name: ("polyprof.model.profile", name) for name in ("Label", "Profile", "ValueType")},
    "ProfileBuilder": ("polyprof.model.builder", "ProfileBuilder"),
    "dump": ("polyprof.model.dump", "dump"),
    "merge": ("polyprof.model.merge", "merge"),
    "from_arrow": ("polyprof.model.table_in", "from_arrow"),
    "from_pandas": ("polyprof.model.table_in", "from_pandas"),
    "LossReport": ("polyprof.formats.loss", "LossReport"),
    "ReadOptions": ("polyprof.formats.options", "ReadOptions"),
    "WriteOptions": ("polyprof.formats.options", "WriteOptions"),
    **{name: ("polyprof.errors", name) for name in (
        "DecompressionLimitError", "InputError", "MalformedInputError", "MissingDependencyError", "OptionsError",
        "OutputError", "PolyprofError", "PolyprofWarning", "StoreError", "UnrecognizedFormatError", "UnsupportedFeatureError")},
    "Options": ("polyprof.analysis.options", "Options"),
    "diff": ("polyprof.analysis.diff", "diff"),
    "filter": ("polyprof.analysis.filters", "apply"),
    "flame": ("polyprof.analysis.flame", "flame_tree"),
    "info": ("polyprof.analysis.info", "info"),
    "peek": ("polyprof.analysis.tree", "peek"),
    "top": ("polyprof.analysis.top", "top"),
    "traces": ("polyprof.analysis.traces", "traces"),
    "tree": ("polyprof.analysis.tree", "tree"),
    "validate": ("polyprof.analysis.validate", "validate"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'polyprof' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
