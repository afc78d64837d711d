"""``python -m polyprof``: the same command line as ``polyprof``."""

from polyprof.cli.main import entry

entry()
