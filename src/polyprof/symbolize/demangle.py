"""Demangling C++ (Itanium), Rust (legacy and v0) and Swift names, pprof's way.

Modes (``--demangle``, pprof's ``-symbolize=demangle=``):

``simple`` (the default)  no parameters, no template arguments, no return
                          type: ``shapes::fold`` (Rust: no ``::<T>`` generics)
``templates``             template arguments kept: ``shapes::fold<unsigned long>``
``full``                  everything c++filt prints, clone suffixes
                          (``[clone .constprop.0]``) dropped
``none``                  the mangled name itself

By default only functions not demangled yet are touched (their name is
empty or equals the mangled system name); an explicit mode re-demangles
every function that has a mangled system name, from that name (``force``).
With an explicit mode, names that are not mangled but read like demangled
C++ (``a::b<c>(d)``) lose their bracketed groups, as pprof does; by default
they are left as the profile spells them (pprof would simplify them too,
which rewrites e.g. simpleperf's Java names). The function's
``system_name`` always keeps the mangled form, so nothing is lost.

Demangling uses the system's ``c++filt`` (binutils) in one batch when it is
installed — the pure-Python ``demangle`` package takes milliseconds per
template-heavy name — and that package otherwise (GNU c++filt spelling for
Itanium, rustfilt's for Rust, Swift's own, and names c++filt cannot read).
The tests check both give the stored c++filt references.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from polyprof.symbolize.cxxnames import simplify_all

__all__ = ["MODES", "Demangling", "demangle_name", "demangle_names", "demangle_profile", "looks_mangled"]

MODES = ("simple", "templates", "full", "none")
_PREFIXES = ("_Z", "__Z", "_R", "$s", "$S", "_$s", "_$S", "_T0", "$e")
_CLONE = re.compile(r"(?:\s*\[clone [^\]]*\])+$")


def looks_mangled(name: str) -> bool:
    return name.startswith(_PREFIXES)


_RUST_HASH = re.compile(r"17h[0-9a-f]{16}E(?:$|\.)")


_SWIFT = ("$s", "$S", "_$s", "_$S", "_T0", "$e")


def _scheme(name: str) -> str:
    return _schemes([name])[name]


def _schemes(names: list[str]) -> dict[str, str]:
    """Name -> "rust", "swift" or "itanium"; one comprehension, no call per name."""
    rust = _RUST_HASH.search
    return {n: "rust" if n.startswith(("_R", "__R")) or ("17h" in n and rust(n)) else
            "swift" if n.startswith(_SWIFT) else "itanium" for n in names}


@lru_cache(maxsize=1 << 16)
def demangle_name(mangled: str, mode: str = "simple") -> str:
    """``mangled`` demangled in ``mode``; unchanged when it is not a mangled name."""
    if mode == "none" or not looks_mangled(mangled):
        return mangled
    import demangle

    scheme = _scheme(mangled)
    if scheme == "swift" and mode != "full":
        from demangle.schemes.swift import SIMPLIFIED_OPTIONS

        return demangle.demangle(mangled, style=demangle.style("llvm", swift=SIMPLIFIED_OPTIONS))
    return _in_mode({mangled: demangle.demangle(mangled, style="gnu")}, mode, {mangled: scheme})[mangled]


def _in_mode(fulls: dict[str, str], mode: str, schemes: dict[str, str]) -> dict[str, str]:
    """The mode's form of each ``fulls[mangled]`` (the GNU spelling of ``mangled``, whose
    :func:`_scheme` is ``schemes[mangled]``); C++ names are simplified in one batch."""
    out: dict[str, str] = {}
    cxx: dict[str, str] = {}
    for mangled, full in fulls.items():
        scheme = schemes[mangled]
        if full == mangled or scheme == "swift":
            out[mangled] = full
        elif scheme == "rust":  # simple drops generic arguments (foo::<T>), as pprof's demangler does
            out[mangled] = _drop_turbofish(full) if mode == "simple" else full
        elif "[clone " in full:  # the guard: an anchored regex scans every position
            cxx[mangled] = _CLONE.sub("", full)
        else:
            cxx[mangled] = full
    if mode == "full":
        out.update(cxx)
    else:
        out.update(zip(cxx, simplify_all(list(cxx.values()), keep_templates=mode == "templates")))
    return out


class NameMemo(Protocol):
    """Demangled names kept between runs (the symbol cache is one: :class:`.cache.ResultCache`)."""

    def names(self, key: str, mangled: list[str]) -> dict[str, str]: ...

    def put_names(self, key: str, demangled: dict[str, str]) -> None: ...


#: Part of the memo's key: bump when the spelling rules change, so old answers are not reused.
RULES = "1"


def demangle_names(names: list[str], mode: str, memo: NameMemo | None = None) -> dict[str, str]:
    """Many names at once: C++ and Rust names through one ``c++filt`` process when binutils is
    installed (the pure-Python demangler takes milliseconds per template-heavy name; c++filt
    microseconds, with the same spelling), the rest through :func:`demangle_name`. With a
    ``memo``, names demangled by an earlier run are taken from it and new ones added."""
    return Demangling(names, mode, memo).result()


class Demangling:
    """:func:`demangle_names` started ahead: ``c++filt`` works in the background from the
    constructor on (the symbolizer fills the profile meanwhile); :meth:`result` collects."""

    def __init__(self, names: list[str], mode: str, memo: NameMemo | None = None) -> None:
        wanted = sorted({n for n in names if n.startswith(_PREFIXES)})  # looks_mangled, inlined
        self.mode, self.memo, self.key = mode, memo, f"{mode}:{RULES}"
        self.out = {n: _DONE[(n, mode)] for n in wanted if (n, mode) in _DONE}
        self.todo = [n for n in wanted if n not in self.out]
        if memo is not None and self.todo and mode != "none":
            kept = memo.names(self.key, self.todo)
            self.out.update(kept)
            self.todo = [n for n in self.todo if n not in kept]
        self.schemes = _schemes(self.todo)  # classified once: the regex scan is not free
        self._system: dict[str, str] = {}
        self._filter: threading.Thread | None = None
        system = [n for n in self.todo if self.schemes[n] != "swift"] if mode != "none" else []
        if system:
            self._filter = threading.Thread(target=lambda: self._system.update(_cxxfilt(system, self.schemes)),
                                            name="polyprof-c++filt", daemon=True)
            self._filter.start()

    def result(self) -> dict[str, str]:
        """Mangled name -> demangled, for every mangled name given."""
        if self._filter is not None:
            self._filter.join()
            self._filter = None
        elif not self.todo:
            return self.out
        fulls = {n: full for n, full in self._system.items() if full != n}
        fresh = _in_mode(fulls, self.mode, self.schemes)
        fresh.update((n, demangle_name(n, self.mode)) for n in self.todo if n not in fulls)
        self.out.update(fresh)
        _DONE.update(((n, self.mode), name) for n, name in fresh.items())
        if len(_DONE) > 1 << 18:  # a long-lived process (the store, the web view) stays bounded
            _DONE.clear()
        if self.memo is not None and self.mode != "none":
            self.memo.put_names(self.key, fresh)
        self.todo = []
        return self.out


_DONE: dict[tuple[str, str], str] = {}


def _cxxfilt(names: list[str], schemes: dict[str, str]) -> dict[str, str]:
    """GNU spellings from c++filt (``$POLYPROF_CXXFILT`` names another, "" none); {} without it."""
    import os
    import shutil
    import subprocess

    forced = os.environ.get("POLYPROF_CXXFILT")
    exe = (shutil.which(forced) if forced else None) if forced is not None else shutil.which("c++filt")
    if not exe or not names or any("\n" in n for n in names):
        return {}
    try:
        done = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(names):
        return {}
    out = {}
    for n, full in zip(names, lines):
        if schemes[n] == "rust":  # rustfilt's spelling: no legacy hash, no v0 crate disambiguators
            full = re.sub(r"::h[0-9a-f]{16}\b", "", full) if n.startswith("_Z") else re.sub(r"\[[0-9a-f]+\]", "", full)
        out[n] = full
    return out


def _drop_turbofish(name: str) -> str:
    """``a::b::<T, U>::c`` -> ``a::b::c``; qualified paths (``<X as Y>::f``) are kept."""
    out, i = [], 0
    while i < len(name):
        if name.startswith("::<", i):
            depth, j = 0, i + 2
            while j < len(name):
                depth += {"<": 1, ">": -1}.get(name[j], 0)
                if depth == 0:
                    break
                j += 1
            i = j + 1
            continue
        out.append(name[i])
        i += 1
    return "".join(out)


def demangle_profile(profile, mode: str = "simple", *, force: bool = False,  # noqa: ANN001, ANN201
                     memo: NameMemo | None = None, ahead: Sequence[Demangling] = ()):
    """``profile`` with demangled function names (a copy; only the function table changes).

    Returns the profile itself when nothing changes. ``memo`` keeps names
    between runs (see :func:`demangle_names`); ``ahead`` are batches of them
    already started in ``mode`` (the rest are demangled here).
    """
    import numpy as np

    from polyprof.symbolize.fill import shallow_copy

    s, f = profile.strings, profile.functions
    if not force and not _any_mangled(s, f):
        return profile  # the usual case (Go, Java, already demangled): one pass over the names
    names, systems = f.name.tolist(), f.system_name.tolist()
    sources = {i: _source(s[n], s[sy], force, mode) for i, (n, sy) in enumerate(zip(names, systems))}
    batch: dict[str, str] = {}
    for job in ahead:
        batch.update(job.result())
    missing = [x for x in sources.values() if x and x not in batch]
    if missing or not ahead:
        batch.update(demangle_names(missing, mode, memo))
    changes: dict[int, tuple[str, str]] = {}
    for i, source in sources.items():
        if source is None:
            continue
        name, system = s[names[i]], s[systems[i]]
        new = batch[source] if source in batch else _heuristic(source, mode)
        if new != name or source != system:
            changes[i] = (new, source)
    if not changes:
        return profile
    out = shallow_copy(profile)
    strings = list(s)
    index = {text: i for i, text in enumerate(strings)}
    texts = [text for pair in changes.values() for text in pair]  # name, source, name, source...
    fresh = [text for text in dict.fromkeys(texts) if text not in index]  # interned in bulk, in order
    index.update(zip(fresh, range(len(strings), len(strings) + len(fresh))))
    strings.extend(fresh)
    codes = np.fromiter(map(index.__getitem__, texts), dtype=np.int64, count=len(texts))
    rows = np.fromiter(changes, dtype=np.int64, count=len(changes))
    name_col, system_col = f.name.copy(), f.system_name.copy()
    name_col[rows], system_col[rows] = codes[0::2], codes[1::2]
    from polyprof.model.profile import FunctionTable

    out.strings = strings
    out.functions = FunctionTable(name_col, system_col, f.filename, f.start_line)
    return out


def _any_mangled(strings: list[str], functions) -> bool:  # noqa: ANN001
    # A set, not np.unique: numpy 2's unique of a plain column imports numpy.ma (~35 ms), and
    # every read comes through here.
    used = {*functions.name.tolist(), *functions.system_name.tolist()}
    return any(strings[i].startswith(_PREFIXES) for i in used)


def _source(name: str, system: str, force: bool, mode: str) -> str | None:
    """The name to demangle from, or None to leave the function alone."""
    if mode == "none":  # only an explicit "none" undoes demangling, back to the mangled name
        return system if force and system.startswith(_PREFIXES) and name != system else None
    if system.startswith(_PREFIXES):  # looks_mangled, inlined: one call per function of the profile
        return system if force or not name or name == system else None
    if name.startswith(_PREFIXES) and (not system or system == name):
        return name
    if force and name == system and name and _reads_like_cpp(name):
        return name
    return None


def _reads_like_cpp(name: str) -> bool:
    """pprof's looksLikeDemangledCPlusPlus (Java ``.<init>`` and Go ``]).`` excluded)."""
    if ".<" in name or "]). " in name or "])." in name:
        return False
    return any(c in name for c in "<>[]") or "::" in name


def _heuristic(name: str, mode: str) -> str:
    """pprof's treatment of names that read like demangled C++: drop (...) and, in simple
    mode, <...> groups, by bracket matching only."""
    if mode in ("full", "none"):
        return name
    name = _remove_matching(name, "(", ")")
    return name if mode == "templates" else _remove_matching(name, "<", ">")


def _remove_matching(name: str, start: str, end: str) -> str:
    """Remove nested ``start``...``end`` groups; a name with unbalanced brackets is kept whole."""
    out, depth = [], 0
    for c in name:
        if c == start:
            depth += 1
        elif c == end:
            depth -= 1
            if depth < 0:
                return name
        elif depth == 0:
            out.append(c)
    return "".join(out) if depth == 0 else name
