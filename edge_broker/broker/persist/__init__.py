"""What the broker keeps across a restart or a power loss: persistent sessions, their queued and
in-flight messages and the retained messages, on one append-only log (docs/persistence.md).

``persistence.py`` collects a turn's changes and writes them ahead of the turn's output;
``codec.py`` turns messages, wills and identities into records and back; ``hooks.py`` is the
journal a persistent session reports its changes through.
"""
