"""Chromium's name hashes and the dictionaries that invert them.

Chrome never sends a module name or a metadata name, only hashes:
``HashMetricName`` = the first 8 bytes of the MD5 digest read big-endian
(spec 4.4). A hash cannot be inverted, so a reader needs candidate names:

- module names (``ModuleIdentifier.name_md5_prefix``): a built-in list of
  common Chrome and system module basenames, plus any names the caller
  passes (the symbolizer adds the module directories of a Breakpad symbol
  store). Windows debug basenames are hashed as UTF-16LE code units, others
  as UTF-8; :func:`module_name_hash` decides by the name's extension.
- metadata names (``metadata_name_hash``): a user file, one name per line
  (``--metadata-names``). Unresolved hashes stay visible as
  ``0x`` + 16 hex digits.

A module whose name hash is not resolved gets the placeholder file name
``md5:<16 hex digits>`` so the hash survives every conversion.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Iterable

from polyprof.errors import InputError

__all__ = ["BUILTIN_MODULE_NAMES", "HASH_PLACEHOLDER", "hash_metric_name", "hash_text", "load_names",
           "module_name_hash", "module_names", "module_placeholder", "parse_hash_text", "placeholder_hash"]

HASH_PLACEHOLDER = "md5:"
_HASH_TEXT = re.compile(r"0x[0-9a-f]{16}")
_WINDOWS_SUFFIXES = (".pdb", ".dll", ".exe")

#: Basenames of modules that commonly appear in Chrome's stacks.
BUILTIN_MODULE_NAMES = (
    # Linux, ChromeOS
    "chrome", "chromium", "chrome_crashpad_handler", "libc.so.6", "libpthread.so.0", "libm.so.6",
    "libdl.so.2", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    "libglib-2.0.so.0", "libgobject-2.0.so.0", "libgio-2.0.so.0", "libX11.so.6", "libxcb.so.1",
    "libnss3.so", "libnspr4.so", "libdbus-1.so.3", "libEGL.so.1", "libGLX.so.0", "libGL.so.1",
    "libvulkan.so.1", "libvk_swiftshader.so", "libEGL.so", "libGLESv2.so", "linux-vdso.so.1",
    # Android
    "libmonochrome.so", "libmonochrome_64.so", "libchrome.so", "libchrome_64.so",
    "libchromium_android_linker.so", "libwebviewchromium.so", "libstandalonebrowser.so",
    "libc.so", "libm.so", "libdl.so", "libart.so", "libandroid_runtime.so", "libbinder.so",
    "libutils.so", "libhwui.so", "libgui.so", "libui.so", "libvulkan.so", "libbase.so",
    "liblog.so", "libc++.so", "linker64", "linker", "boot.oat", "boot-framework.oat", "base.odex",
    "libjavacore.so", "libopenjdk.so",
    # macOS, iOS
    "Google Chrome", "Google Chrome Framework", "Google Chrome Helper", "Chromium Framework",
    "Chromium Helper", "libsystem_kernel.dylib", "libsystem_pthread.dylib",
    "libsystem_platform.dylib", "libsystem_malloc.dylib", "libdispatch.dylib", "libobjc.A.dylib",
    "libc++.1.dylib", "libc++abi.dylib", "dyld", "CoreFoundation", "Foundation", "AppKit",
    "HIToolbox", "CoreGraphics", "QuartzCore", "Metal", "SkyLight", "UIKitCore",
    # Windows (debug basenames are PDB names; plain image names as a fallback)
    "chrome.dll.pdb", "chrome.exe.pdb", "chrome_elf.dll.pdb", "chrome_child.dll.pdb",
    "wntdll.pdb", "ntdll.pdb", "kernel32.pdb", "kernelbase.pdb", "user32.pdb", "win32u.pdb",
    "gdi32.pdb", "gdi32full.pdb", "combase.pdb", "rpcrt4.pdb", "ucrtbase.pdb", "msvcrt.pdb",
    "ws2_32.pdb", "mswsock.pdb", "ole32.pdb", "shell32.pdb", "d3d11.pdb", "dxgi.pdb",
    "chrome.exe", "chrome.dll", "chrome_elf.dll", "ntdll.dll", "kernel32.dll", "kernelbase.dll",
)


def hash_metric_name(data: bytes) -> int:
    """Chromium's ``base::HashMetricName``: MD5, first 8 digest bytes, big-endian."""
    return struct.unpack(">Q", hashlib.md5(data).digest()[:8])[0]


def _basename(path: str) -> str:
    return re.split(r"[/\\]", path)[-1]


def module_name_hash(name: str) -> int:
    """``name_md5_prefix`` of a module: its basename hashed as Chrome's client would.

    Windows clients hash UTF-16LE code units (their paths are wide strings);
    names ending in .pdb, .dll or .exe are taken to be Windows names.
    """
    base = _basename(name)
    wide = base.lower().endswith(_WINDOWS_SUFFIXES)
    return hash_metric_name(base.encode("utf-16-le" if wide else "utf-8", errors="surrogatepass"))


def module_placeholder(name_hash: int) -> str:
    """The file name given to a module whose name hash is not resolved."""
    return f"{HASH_PLACEHOLDER}{name_hash:016x}"


def placeholder_hash(filename: str) -> int | None:
    """The hash held by a :func:`module_placeholder` name, else None."""
    rest = filename[len(HASH_PLACEHOLDER):] if filename.startswith(HASH_PLACEHOLDER) else ""
    if len(rest) == 16 and all(c in "0123456789abcdef" for c in rest):
        return int(rest, 16)
    return None


def hash_text(name_hash: int) -> str:
    """How an unresolved metadata name hash is shown: ``0x`` + 16 hex digits."""
    return f"0x{name_hash:016x}"


def parse_hash_text(text: str) -> int | None:
    """Inverse of :func:`hash_text`; None for any other text."""
    return int(text, 16) if _HASH_TEXT.fullmatch(text) else None


def module_names(extra: Iterable[str] = ()) -> dict[int, str]:
    """Hash -> name for the built-in module names plus ``extra`` (later names lose ties)."""
    out: dict[int, str] = {}
    for name in (*BUILTIN_MODULE_NAMES, *extra):
        out.setdefault(module_name_hash(name), _basename(name))
    return out


def load_names(path: str) -> dict[int, str]:
    """Hash -> name for a names file: one name per line, blank lines ignored.

    Names are hashed as the raw bytes of the line (so names that are not UTF-8
    still match); they are shown decoded with replacement characters.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise InputError("names file not found", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read names file ({exc.strerror})", path=os.fspath(path)) from None
    out: dict[int, str] = {}
    for raw in data.splitlines():
        raw = raw.strip()
        if raw:
            out.setdefault(hash_metric_name(raw), raw.decode("utf-8", errors="replace"))
    return out
