"""Samples as a table: a Profile to and from Arrow (and pandas), vectorized.

Column naming is shared with the analysis results' tables: a label is a
column named by its key, or ``label:<key>`` when the key is already the name
of another column.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["label_column"]

LABEL_PREFIX = "label:"


def label_column(key: str, taken: Container[str]) -> str:
    """The column name of label ``key`` next to the columns in ``taken``."""
    return key if key not in taken else LABEL_PREFIX + key
