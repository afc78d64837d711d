"""The fuzz targets: what one input goes through, and what counts as a failure.

A format target reads the input as that format (the format forced, so the
reader is exercised even where the sniffer would refuse), then runs ``top``,
decodes the labels, and writes the profile with every writer. The input
passes when all of that succeeds or stops with one of polyprof's own errors
(``polyprof.errors``), whose message is one line. Anything else -- another
exception, a hang, a memory blow-up (the drivers enforce those) -- is a
finding.

The same functions are used by the atheris driver (``fuzz/run.py``), by the
pure-Python fallback driver, and by the regression test that replays every
input the fuzzers ever found (``tests/test_fuzz_regressions.py``).
"""

from __future__ import annotations

import io

# polyprof is imported inside the functions: the atheris driver must import it
# (after importing this module) within its instrumentation block.

__all__ = ["FORMATS", "SMOKE_SHARE", "TARGETS", "run"]

FORMATS = ("pprof", "perfetto", "simpleperf", "chromium", "pprof-legacy")
#: Share of the smoke run's time per target (1 when not listed): the text parsers need less.
SMOKE_SHARE = {"pprof-legacy": 0.5, "sniff": 0.5, "breakpad": 0.5, "elf": 0.5}


def _check_error(exc: Exception) -> None:
    text = str(exc)
    if not text or "\n" in text:
        raise AssertionError(f"a polyprof error must be one non-empty line, got {text!r}")


def _pipeline(data: bytes, fmt: str | None) -> None:
    import polyprof
    from polyprof.analysis.top import top
    from polyprof.errors import PolyprofError
    from polyprof.formats import registry
    from polyprof.formats.options import ReadOptions, WriteOptions

    try:
        profiles = polyprof.read_all(data, format=fmt, options=ReadOptions())
    except PolyprofError as exc:
        _check_error(exc)
        return
    for p in profiles[:4]:
        try:
            top(p)
            p.labelsets  # noqa: B018 - deferred label sets are decoded here
        except PolyprofError as exc:
            _check_error(exc)
            continue
        for spec in registry.available():
            if not spec.can_write:
                continue
            try:
                spec.load().write(p, io.BytesIO(), WriteOptions())
            except PolyprofError as exc:
                _check_error(exc)


def _format_target(fmt: str):  # noqa: ANN202
    def target(data: bytes) -> None:
        _pipeline(data, fmt)
    target.__name__ = fmt
    return target


def sniff(data: bytes) -> None:
    """Every sniffer answers True or False; detection raises only polyprof errors."""
    import polyprof
    from polyprof.errors import PolyprofError
    from polyprof.formats import registry

    for spec in registry.available():
        sniffer = getattr(spec.load(), "sniff", None) if spec.can_read else None
        if sniffer is not None and sniffer(data[: 1 << 16]) not in (True, False):
            raise AssertionError(f"{spec.name}.sniff returned a non-bool")
    try:
        polyprof.detect(data)
    except PolyprofError as exc:
        _check_error(exc)


def breakpad(data: bytes) -> None:
    """Parse a Breakpad symbol file and look up a few addresses."""
    from polyprof.errors import PolyprofError
    from polyprof.symbolize.breakpad import parse_lines

    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        sym = parse_lines(lines, "<fuzz>")
        for address in (0, 1, 0x1000, 0x10000, (1 << 64) - 1, len(data)):
            sym.lookup(address)
    except PolyprofError as exc:
        _check_error(exc)


def elf(data: bytes) -> None:
    """Read an ELF file as symbolization does: headers, build id, debuglink, symbols, MiniDebugInfo."""
    from polyprof.errors import PolyprofError
    from polyprof.symbolize.elf import ElfFile

    try:
        f = ElfFile("<fuzz>", data)
        f.validate()
        f.build_id, f.debuglink, f.has_dwarf, f.loading_address, f.exec_load_bias  # noqa: B018
        sym = f.symbols
        for address in (0, 0x1000, 0x1139, (1 << 64) - 1, len(data)):
            sym.lookup(address)
    except PolyprofError as exc:
        _check_error(exc)


#: name -> function of one input
TARGETS = {**{f: _format_target(f) for f in FORMATS}, "sniff": sniff, "breakpad": breakpad, "elf": elf}


def run(target: str, data: bytes) -> None:
    """Run one input through ``target``; raises on a finding."""
    TARGETS[target](data)
