"""The web console: static pages (HTML, CSS, JavaScript modules) the admin listener serves at
``/`` and ``/static/``. Nothing here runs in Python; the pages talk only to the admin API v1
(``/api/v1/...``) and its Server-Sent Events stream, so they work on a LAN with no internet.

Every value that came from a client (client id, user name, topic, payload preview) is put into
the page as text (``textContent``), never parsed as HTML, and the pages need no inline script
or style: they run under ``script-src 'self'; style-src 'self'``.
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The folder served at ``/static/``; ``index.html`` in it is served at ``/``."""
