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

The demangler is the pure-Python ``demangle`` package (GNU c++filt
spelling for Itanium, rustfilt's for Rust, Swift's own); its output is
checked against c++filt/llvm-cxxfilt in the tests.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["MODES", "demangle_name", "demangle_profile", "looks_mangled"]

MODES = ("simple", "templates", "full", "none")
_PREFIXES = ("_Z", "__Z", "_R", "$s", "$S", "_$s", "_$S", "_T0", "$e")
_CLONE = re.compile(r"(?:\s*\[clone [^\]]*\])+$")
_OPERATOR = re.compile(r"operator(?:\(\)|\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|<|>|\s[^(<]+?(?=\(|$))")
_QUALIFIERS = re.compile(r"^(?:\s*(?:const|volatile|&&|&|noexcept|throw\(\)))*$")


def looks_mangled(name: str) -> bool:
    return name.startswith(_PREFIXES)


def _scheme(name: str) -> str:
    if name.startswith(("_R", "__R")) or re.search(r"17h[0-9a-f]{16}E$", name):
        return "rust"
    if name.startswith(("$s", "$S", "_$s", "_$S", "_T0", "$e")):
        return "swift"
    return "itanium"


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
    full = demangle.demangle(mangled, style="gnu")
    if full == mangled:
        return full
    if scheme == "rust":  # simple drops generic arguments (foo::<T>), as pprof's demangler does
        return _drop_turbofish(full) if mode == "simple" else full
    if scheme != "itanium":
        return full
    full = _CLONE.sub("", full)
    return full if mode == "full" else simplify(full, keep_templates=mode == "templates")


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


def _skip_operator(text: str, i: int) -> int:
    """If an operator name starts at ``i``, the index after it; else ``i``."""
    if text.startswith("operator", i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        m = _OPERATOR.match(text, i)
        if m:
            return m.end()
    return i


def _groups(text: str) -> list[tuple[int, int, str]]:
    """Top-level and nested bracket groups as (start, end, opener), operator names skipped."""
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    pairs = {"(": ")", "<": ">", "[": "]", "{": "}"}
    i = 0
    while i < len(text):
        j = _skip_operator(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c in pairs:
            stack.append((i, c))
        elif stack and c == pairs[stack[-1][1]]:
            start, opener = stack.pop()
            out.append((start, i + 1, opener))
        i += 1
    return out


def simplify(full: str, *, keep_templates: bool) -> str:
    """pprof's simplified C++ name: drop the parameter list, return type, enclosing
    functions' parameters and (unless ``keep_templates``) template arguments."""
    text = _drop_params(full)
    text = _drop_return_type(text)
    cut = []
    groups = _groups(text)
    for start, end, opener in groups:
        inner = text[start:end]
        if opener == "(" and inner != "(anonymous namespace)" and not _inside(groups, start, "<{"):
            cut.append((start, end))  # an enclosing function's parameters: f(int)::g
        elif opener == "<" and not keep_templates and not _inside(groups, start, "{"):
            cut.append((start, end))
    return _remove(text, cut)


def _inside(groups: list[tuple[int, int, str]], at: int, openers: str) -> bool:
    """Whether position ``at`` lies inside a group opened by one of ``openers`` (lambda braces,
    template arguments: ``std::function<void ()>`` keeps its ``()``)."""
    return any(opener in openers and start < at < end for start, end, opener in groups)


def _drop_params(text: str) -> str:
    """Cut the outermost trailing parameter list (and cv/ref qualifiers after it)."""
    for start, end, opener in sorted(_groups(text), key=lambda g: -g[0]):
        if opener == "(" and _QUALIFIERS.match(text[end:]) and _depth0(text, start):
            return text[:start]
    return text


def _depth0(text: str, at: int) -> bool:
    return not any(s < at < e for s, e, _ in _groups(text))


def _drop_return_type(text: str) -> str:
    """Cut a return type: everything up to the last depth-0 space before the name."""
    groups = _groups(text)
    i = len(text)
    op = text.rfind("operator")
    limit = op if op >= 0 and _depth0(text, op) else len(text)
    for pos in range(min(limit, len(text)) - 1, -1, -1):
        if text[pos] == " " and not any(s < pos < e for s, e, _ in groups):
            i = pos
            break
    return text[i + 1:] if i < len(text) else text


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue  # nested in a span already removed
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    return "".join(out)


def demangle_profile(profile, mode: str = "simple", *, force: bool = False):  # noqa: ANN001, ANN201
    """``profile`` with demangled function names (a copy; only the function table changes).

    Returns the profile itself when nothing changes.
    """
    from polyprof.symbolize.fill import shallow_copy

    s, f = profile.strings, profile.functions
    if not force and not _any_mangled(s, f):
        return profile  # the usual case (Go, Java, already demangled): one pass over the names
    names, systems = f.name.tolist(), f.system_name.tolist()
    changes: dict[int, tuple[str, str]] = {}
    for i, (n, sy) in enumerate(zip(names, systems)):
        name, system = s[n], s[sy]
        source = _source(name, system, force, mode)
        if source is None:
            continue
        new = demangle_name(source, mode) if looks_mangled(source) else _heuristic(source, mode)
        if new != name or source != system:
            changes[i] = (new, source)
    if not changes:
        return profile
    out = shallow_copy(profile)
    strings = list(s)
    index = {text: i for i, text in enumerate(strings)}

    def sid(text: str) -> int:
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    name_col, system_col = f.name.copy(), f.system_name.copy()
    for i, (new, source) in changes.items():
        name_col[i], system_col[i] = sid(new), sid(source)
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
        return system if force and looks_mangled(system) and name != system else None
    if looks_mangled(system):
        return system if force or not name or name == system else None
    if looks_mangled(name) and (not system or system == name):
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
