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

import bisect
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

__all__ = ["MODES", "Demangling", "demangle_name", "demangle_names", "demangle_profile", "looks_mangled"]

MODES = ("simple", "templates", "full", "none")
_PREFIXES = ("_Z", "__Z", "_R", "$s", "$S", "_$s", "_$S", "_T0", "$e")
_CLONE = re.compile(r"(?:\s*\[clone [^\]]*\])+$")
_OPERATOR = re.compile(r"operator(?:\(\)|\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|<|>|\s[^(<]+?(?=\(|$))")
_QUALIFIERS = re.compile(r"^(?:\s*(?:const|volatile|&&|&|noexcept|throw\(\)))*$")


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


_TOKENS = re.compile(r"operator|[()<>\[\]{}]")


def _groups(text: str) -> list[tuple[int, int, str, int]]:
    """Bracket groups as (start, end, opener, depth), operator names skipped; one regex scan."""
    out: list[tuple[int, int, str, int]] = []
    stack: list[tuple[int, str]] = []
    pairs = {"(": ")", "<": ">", "[": "]", "{": "}"}
    skip_to = 0
    for m in _TOKENS.finditer(text):
        i = m.start()
        if i < skip_to:
            continue
        c = m.group()
        if c == "operator":
            if i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):
                op = _OPERATOR.match(text, i)
                skip_to = op.end() if op else i
            continue
        if c in pairs:
            stack.append((i, c))
        elif stack and c == pairs[stack[-1][1]]:
            start, opener = stack.pop()
            out.append((start, i + 1, opener, len(stack)))
    return out


_BRACKET = re.compile(r"[<>(){}]")


# Every branch starts with a literal (the word check on "operator" comes after it), so the
# regex engine skips ahead to the next "(", "{" or "o" instead of trying each position. No
# branch crosses a line end: many names are simplified at once, one per line.
_PROTECTED = re.compile(r"\(anonymous namespace\)|\{[^{}\n]*\}|operator(?<!\woperator)(?:\(\)|\[\]|<=>|<<=|>>=|->\*|"
                        r"<<|>>|<=|>=|->|<|>|[^\S\n][^(<\n]+?(?=\(|$))", re.MULTILINE)
_INNERMOST_ANGLES = re.compile(r"<[^<>\n]*>")
_INNERMOST_PARENS = re.compile(r"\([^()\n]*\)")
_KEPT = re.compile("\0(\\d+)\0")
_TRAILING_QUALIFIERS = re.compile(r"(?:\s*(?:const|volatile|&&|&|noexcept))+$")
_QUALIFIER_ENDS = ("const", "volatile", "&", "noexcept")  # any match ends so: a cheap guard


def _simple_fast(fulls: list[str]) -> list[str | None]:
    """``simplify(full, keep_templates=False)`` of each name by regular expressions run over
    many of them joined, one per line (C speed, a few passes in all instead of a few per name).
    None for a name that does not fit (the careful path takes it)."""
    out: list[str | None] = [None] * len(fulls)
    rows = [i for i, full in enumerate(fulls) if "\0" not in full and "\n" not in full]
    special = {i for i in rows if "{" in fulls[i] or "operator" in fulls[i] or "(anon" in fulls[i]}
    for group, protect in (([i for i in rows if i not in special], False), (sorted(special), True)):
        for i, name in zip(group, _simple_lines([fulls[i] for i in group], protect=protect)):
            out[i] = name
    return out


def _simple_lines(names: list[str], *, protect: bool) -> list[str | None]:
    """:func:`_simple_fast` of names without newlines or NULs: with ``protect``, operator names,
    lambda braces and ``(anonymous namespace)`` are set aside first; then innermost <...> and
    (...) groups are stripped until none are left, then trailing qualifiers and the return type
    before the last space."""
    text = "\n".join(names)
    kept: list[str] = []

    def keep(m: re.Match) -> str:
        kept.append(m.group())
        return f"\0{len(kept) - 1}\0"

    if protect:
        text = _PROTECTED.sub(keep, text)
    for pattern, opener in ((_INNERMOST_ANGLES, "<"), (_INNERMOST_PARENS, "(")):
        while opener in text:  # no opener left: no pass needed to find nothing
            text, count = pattern.subn("", text)
            if not count:
                break
    unusual = _lines_at(text, [m.start() for m in _BRACKET.finditer(text)])
    lines = [_TRAILING_QUALIFIERS.sub("", n) if n.endswith(_QUALIFIER_ENDS) else n for n in text.split("\n")]
    lines = [n.rsplit(" ", 1)[-1] for n in lines]
    if kept:
        lines = [_KEPT.sub(lambda m: kept[int(m.group(1))], n) if "\0" in n else n for n in lines]
    # a bracket left: unbalanced or unusual, for the careful path
    return [None if i in unusual else n for i, n in enumerate(lines)]


def _lines_at(text: str, positions: list[int]) -> set[int]:
    """The lines of ``text`` (numbered from 0) that hold ``positions``."""
    if not positions:
        return set()
    line_ends = [m.start() for m in re.finditer("\n", text)]
    return {bisect.bisect_left(line_ends, at) for at in positions}


def simplify_all(fulls: list[str], *, keep_templates: bool) -> list[str]:
    """:func:`simplify` of each of ``fulls``, the common names in one batch."""
    fast = [None] * len(fulls) if keep_templates else _simple_fast(fulls)
    return [name if name is not None else _simplify_careful(full, keep_templates)
            for full, name in zip(fulls, fast)]


def simplify(full: str, *, keep_templates: bool) -> str:
    """pprof's simplified C++ name: drop the parameter list, return type, enclosing
    functions' parameters and (unless ``keep_templates``) template arguments."""
    return simplify_all([full], keep_templates=keep_templates)[0]


def _simplify_careful(full: str, keep_templates: bool) -> str:
    """:func:`simplify` by bracket matching, for every name."""
    text = _drop_params(full, _groups(full))
    text = _drop_return_type(text, _groups(text))
    cut = []
    groups = _groups(text)
    for start, end, opener, _ in groups:
        if opener == "(" and text[start:end] != "(anonymous namespace)" and not _inside(groups, start, "<{"):
            cut.append((start, end))  # an enclosing function's parameters: f(int)::g
        elif opener == "<" and not keep_templates and not _inside(groups, start, "{"):
            cut.append((start, end))
    return _remove(text, cut)


def _inside(groups: list[tuple[int, int, str, int]], at: int, openers: str) -> bool:
    """Whether position ``at`` lies inside a group opened by one of ``openers`` (lambda braces,
    template arguments: ``std::function<void ()>`` keeps its ``()``)."""
    return any(opener in openers and start < at < end for start, end, opener, _ in groups)


def _drop_params(text: str, groups: list[tuple[int, int, str, int]]) -> str:
    """Cut the outermost trailing parameter list (and cv/ref qualifiers after it)."""
    for start, end, opener, depth in sorted(groups, key=lambda g: -g[0]):
        if opener == "(" and depth == 0 and _QUALIFIERS.match(text[end:]):
            return text[:start]
    return text


def _drop_return_type(text: str, groups: list[tuple[int, int, str, int]]) -> str:
    """Cut a return type: everything up to the last depth-0 space before the name (spaces of an
    operator name such as ``operator new`` excepted)."""
    inner = bytearray(len(text) + 1)
    for start, end, _, _ in groups:
        inner[start + 1:end - 1] = b"\1" * (end - start - 2)
    op = text.rfind("operator")
    limit = op if op >= 0 and not inner[op] else len(text)
    for pos in range(limit - 1, -1, -1):
        if text[pos] == " " and not inner[pos]:
            return text[pos + 1:]
    return text


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue  # nested in a span already removed
        out.append(text[last:start])
        last = end
    out.append(text[last:])
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
    import numpy as np

    if not len(functions):
        return False
    used = np.unique(np.concatenate([functions.name, functions.system_name]))
    return any(strings[i].startswith(_PREFIXES) for i in used.tolist())


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
