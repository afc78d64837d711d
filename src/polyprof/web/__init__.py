"""``polyprof serve``: a local web view over the analyses (flame, top, sandwich, tree, timeline, labels, diff).

Layers: :mod:`~polyprof.web.session` holds the read profiles and caches,
:mod:`~polyprof.web.params` turns query strings into Options,
:mod:`~polyprof.web.api` is one endpoint per analysis,
:mod:`~polyprof.web.present` adds display text,
:mod:`~polyprof.web.app` routes and checks requests without sockets, and
:mod:`~polyprof.web.server` moves bytes (standard library HTTP server).
The page (``static/``) is plain hand-written HTML, CSS and JavaScript
modules, served from package data: no build step, nothing from the network.
"""
