"""pprof's simplified C++ names: ``shapes::fold<unsigned long>(...) const`` -> ``shapes::fold``.

The demangled (GNU c++filt) spelling loses its parameter list, return
type, enclosing functions' parameters and, in ``simple`` mode, template
arguments; operator names, lambda braces (``{lambda()#1}``) and
``(anonymous namespace)`` are kept. Many names are simplified at once by
regular expressions over all of them joined, one per line (a few passes in
all instead of a few per name); a name that does not fit that path takes
the careful one, bracket matching, which gives the same answers (tested).
"""

from __future__ import annotations

import bisect
import re

__all__ = ["simplify", "simplify_all"]

_OPERATOR = re.compile(r"operator(?:\(\)|\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|<|>|\s[^(<]+?(?=\(|$))")
_QUALIFIERS = re.compile(r"^(?:\s*(?:const|volatile|&&|&|noexcept|throw\(\)))*$")
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
