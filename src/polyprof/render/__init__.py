"""Renderers: turn analysis results into text, JSON, SVG and HTML."""
