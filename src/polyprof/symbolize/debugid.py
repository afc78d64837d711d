"""Build ids as clients send them, and the Breakpad debug ids symbol stores use.

Forms met in profiles (spec 4.4):

- UMA, ELF (Linux, Android, ChromeOS): uppercase hex of the whole GNU
  build-id note, then ``"0"``. Breakpad's debug id takes the first 16 bytes
  (zero-padded), byte-swaps the first 4-, 2- and 2-byte groups (GUID
  little-endian fields), prints them as uppercase hex and appends ``"0"``.
  Example: ``7F0715C286F8B16C10E4AD349CDA3B9B56C7A773`` ->
  ``C215077FF8866CB110E4AD349CDA3B9B0``.
- UMA, Windows: the PDB GUID in text order, then the age in *decimal*;
  Breakpad prints the age in *hex*, so the two differ when the age is >= 10.
- Perfetto traces from Chrome, macOS/iOS: already the Breakpad form.
- pprof/perf: raw lowercase hex of the build-id note (no age).

The form cannot always be told from the text, so :func:`candidates` lists
every debug id a build id may stand for, most likely first; a symbol store
holds at most one of them.
"""

from __future__ import annotations

import string

__all__ = ["candidates", "elf_debug_id"]

_HEX = set(string.hexdigits)


def _is_hex(text: str) -> bool:
    return bool(text) and set(text) <= _HEX


def elf_debug_id(build_id_hex: str) -> str:
    """Breakpad's debug id for an ELF build id given as hex (spec 4.4)."""
    raw = build_id_hex[:32].ljust(32, "0").upper()
    swapped = raw[6:8] + raw[4:6] + raw[2:4] + raw[0:2] + raw[10:12] + raw[8:10] + raw[14:16] + raw[12:14]
    return swapped + raw[16:32] + "0"


def _windows_debug_id(build_id: str) -> str | None:
    guid, age = build_id[:32], build_id[32:]
    if len(build_id) > 32 and _is_hex(guid) and age.isdigit() and len(age) <= 10:
        return f"{guid.upper()}{int(age):X}"
    return None


def candidates(build_id: str) -> list[str]:
    """Breakpad debug ids ``build_id`` may correspond to, most likely first."""
    text = build_id.strip()
    out: list[str] = []

    def add(candidate: str | None) -> None:
        if candidate and candidate not in out:
            out.append(candidate)

    if not text:
        return out
    if len(text) == 33 and _is_hex(text):
        add(text.upper())  # already a Breakpad id (Chrome's Perfetto traces, macOS)
    if len(text) % 2 == 1 and text.endswith("0") and _is_hex(text[:-1]):
        add(elf_debug_id(text[:-1]))  # UMA ELF form: build-id hex + "0"
    add(_windows_debug_id(text))
    if len(text) % 2 == 0 and _is_hex(text):
        add(elf_debug_id(text))  # raw build-id hex (pprof, perf)
    add(text.upper())
    return out
