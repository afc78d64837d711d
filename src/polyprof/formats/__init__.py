"""Readers and writers, one module per format, found through the registry."""
