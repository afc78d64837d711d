"""The one validity check, run after every read and in every test.

It proves the model's invariants: every reference is in range, callsite
parents come before their children (so stacks are finite and cycle-free),
every sample has one value per sample type, and the string table starts with
"". A failure is a bug in a reader or builder, reported as
:class:`polyprof.errors.MalformedInputError` so the command line still prints
one line.
"""

from __future__ import annotations

import numpy as np

from polyprof.errors import MalformedInputError
from polyprof.model.profile import Profile

__all__ = ["check"]


def _in_range(name: str, col: np.ndarray, size: int, *, allow_none: bool = False) -> None:
    if col.size == 0:
        return
    lo = -1 if allow_none else 0
    if int(col.min()) < lo or int(col.max()) >= size:
        raise MalformedInputError(f"invalid profile: {name} refers outside its table (size {size})")


def check(p: Profile) -> None:
    """Raise MalformedInputError if ``p`` breaks a model invariant."""
    if not p.strings or p.strings[0] != "":
        raise MalformedInputError("invalid profile: string 0 must be empty")
    ns = len(p.strings)
    f = p.functions
    if not (len(f.name) == len(f.system_name) == len(f.filename) == len(f.start_line)):
        raise MalformedInputError("invalid profile: function columns differ in length")
    for name in ("name", "system_name", "filename"):
        _in_range(f"function {name}", getattr(f, name), ns)
    m = p.mappings
    _in_range("mapping filename", m.filename, ns)
    _in_range("mapping build_id", m.build_id, ns)
    loc = p.locations
    if len(loc.line_start) != len(loc) + 1 or loc.line_start[0] != 0 \
            or loc.line_start[-1] != len(p.lines) or np.any(np.diff(loc.line_start) < 0):
        raise MalformedInputError("invalid profile: location line offsets are inconsistent")
    _in_range("location mapping", loc.mapping, len(m), allow_none=True)
    _in_range("line function", p.lines.function, len(f), allow_none=True)
    cs = p.callsites
    _in_range("callsite location", cs.location, len(loc))
    if _parent_after_child(cs.parent):
        raise MalformedInputError("invalid profile: a callsite's parent does not precede it (cycle?)")
    _in_range("callsite parent", cs.parent, len(cs), allow_none=True)
    s = p.samples
    n = len(s.stack)
    if s.values.shape != (n, len(p.sample_types)):
        raise MalformedInputError(
            f"invalid profile: sample values have shape {s.values.shape}, "
            f"expected ({n}, {len(p.sample_types)})")
    _in_range("sample stack", s.stack, len(cs), allow_none=True)
    if not s.is_deferred("labelset"):  # deferred labels are checked by their reader as they decode
        if len(s.labelset) != n:
            raise MalformedInputError("invalid profile: labelset column length differs from samples")
        _in_range("sample labelset", s.labelset, len(p.labelsets))
        if p.labelsets[0] != ():
            raise MalformedInputError("invalid profile: label set 0 must be empty")
    for name in s.OPTIONAL_COLUMNS:
        col = getattr(s, name)
        if col is not None and len(col) != n:
            raise MalformedInputError(f"invalid profile: sample {name} column length differs")


def _parent_after_child(parent: np.ndarray, block: int = 1 << 20) -> bool:
    """Whether some callsite's parent id is not below its own: block by block, so that a tree of
    millions of callsites needs no id array of its size."""
    return any(bool(np.any(parent[lo:lo + block] >= np.arange(lo, min(lo + block, parent.size))))
               for lo in range(0, parent.size, block))
