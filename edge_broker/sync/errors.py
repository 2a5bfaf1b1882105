"""The policy-sync layer's exception base (CONVENTIONS.md "Errors").

:class:`SyncError` is what ``sync`` raises; callers catch the subclasses apart: a bundle that
is malformed, not genuine or not for this gateway (``bundle.BundleError``: kept, the good
policy stays), a state directory that cannot be used (``state.SyncStateError``).
"""

from __future__ import annotations


class SyncError(Exception):
    """Sync cannot go on; the message names the key, path or bundle field and what to change."""
