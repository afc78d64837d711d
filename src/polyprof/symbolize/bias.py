"""Profile addresses -> ELF virtual addresses, per mapping (load bias and file offset).

What a location's address means depends on where the profile came from;
this table is the one place that says so:

- ``runtime`` (pprof, and the default): an address in the process. The
  base is computed as ``go tool pprof`` does (``elfexec.GetBase``): for an
  executable or shared object, ``start - offset + p_offset - p_vaddr`` of
  the ``PT_LOAD`` segment the mapping's file offset falls in (PIE, non-PIE
  and shared libraries alike); a whole-address-space mapping (start 0,
  offset 0) means addresses are already ELF addresses. An address outside
  its mapping's range is taken as already relative (a converted profile).
- ``file`` (simpleperf ``vaddr_in_file``, Perfetto ``rel_pc``): already an
  ELF virtual address. Perfetto's Android 10 load-bias bug is corrected as
  trace processor does, when the trace recorded the mapping's load bias.
- ``module`` (Chromium): an offset from the module's load address, which
  Breakpad and Chrome take as the vaddr of the segment at file offset 0.

Android libraries mapped straight from an APK: the mapping's offset is in
the APK. When the APK was found, the library's offset inside it is
subtracted; otherwise the mapping is assumed to map the executable segment.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from polyprof.symbolize.elf import ET_DYN, ET_EXEC, ET_REL, ElfFile, Segment

__all__ = ["ADDRESS_KINDS", "to_vaddr"]

_MASK = (1 << 64) - 1

ADDRESS_KINDS = {"simpleperf": "file", "perfetto": "file", "chromium": "module"}
_PAGE = 0x1000
_ALL = (0, (1 << 64) - 1)


def _segment_for(elf: ElfFile, offset: int, size: int) -> Segment | None:
    """The PT_LOAD segment a mapping at file ``offset`` of ``size`` bytes maps (pprof's rule)."""
    segments = elf.segments
    inside = [s for s in segments if offset <= s.offset and (not size or s.offset + s.filesz <= offset + size)]
    if len(inside) > 1:  # small segments can share a page: prefer code, then the first
        inside = [s for s in inside if s.executable] or inside
    if inside:
        return inside[0]
    covering = [s for s in segments if (s.offset & ~(_PAGE - 1)) <= offset < s.offset + max(s.filesz, 1)]
    return covering[0] if covering else None


def runtime_base(elf: ElfFile, start: int, limit: int, offset: int) -> int:
    """pprof's base: ELF address = runtime address - base."""
    if start == 0 and offset == 0 and limit in _ALL:
        return 0
    seg = _segment_for(elf, offset, limit - start if limit > start else 0)
    if elf.type == ET_EXEC:
        return 0 if seg is None else start - offset + seg.offset - seg.vaddr
    if elf.type == ET_REL:
        return start
    if elf.type == ET_DYN:
        return start - offset if seg is None else start - offset + seg.offset - seg.vaddr
    return 0


def to_vaddr(kind: str, elf: ElfFile, start: int, limit: int, offset: int, addresses: Sequence[int] | np.ndarray,
             *, apk_offset: int | None = None, in_apk: bool = False, load_bias: int | None = None) -> np.ndarray:
    """ELF virtual addresses (uint64, wrapping as the address space does) of ``addresses`` of one
    mapping (see the module docstring); vectorized."""
    a = addresses.astype(np.uint64) if isinstance(addresses, np.ndarray) else \
        np.fromiter((x & _MASK for x in addresses), dtype=np.uint64, count=len(addresses))
    if kind == "file":
        fix = elf.exec_load_bias() - load_bias if load_bias is not None and elf.exec_load_bias() > load_bias else 0
        return a + np.uint64(fix & _MASK)
    if kind == "module":
        return a + np.uint64(elf.loading_address() & _MASK)
    if in_apk:
        if apk_offset is not None:
            offset -= apk_offset
        else:
            code = next((s for s in elf.segments if s.executable), None)
            offset = (code.offset & ~(_PAGE - 1)) if code is not None else 0
    base = np.uint64(runtime_base(elf, start, limit, offset) & _MASK)
    inside = np.ones(len(a), dtype=bool) if not start else (a >= start) & ((a < limit) if limit > start else True)
    return np.where(inside, a - base, a)  # addresses outside the mapping are taken as they are
