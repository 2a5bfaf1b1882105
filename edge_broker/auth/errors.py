"""The authentication layer's exception base (CONVENTIONS.md "Errors").

:class:`AuthError` is what ``auth`` raises; the subclasses exist where callers catch them apart:
a refused token (:class:`~edge_broker.auth.token.TokenError`, with a reason code for the
CONNACK), a key that cannot be loaded (:class:`~edge_broker.auth.token_keys.TokenKeyError`), a
password file that cannot be used (:class:`~edge_broker.auth.password.PasswordFileError`), a
login storm's full wait queue (:class:`~edge_broker.auth.hash_slots.SlotsFull`). Depends on
nothing of ours, so the credential formats below ``config.py`` can use it.
"""

from __future__ import annotations


class AuthError(Exception):
    """Authentication cannot go on; the message says why and what to change."""
