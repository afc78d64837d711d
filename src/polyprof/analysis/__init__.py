"""Analyses: functions from a Profile and Options to result objects (never printing)."""
