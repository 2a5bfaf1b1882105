"""The store layer's exception types: a failed operation, and a store that cannot be opened."""

from __future__ import annotations


class StoreError(Exception):
    """A store operation failed; the message names the file and says what to change.

    ``durable`` is ``False`` when the failed operation carried a record: nothing was promised
    about it, so a caller that was about to acknowledge (a PUBACK, a claim) must answer with an
    error instead. ``errno`` is the OS error number behind the failure (ENOSPC, EROFS, EIO, …)
    or ``None`` when the failure is not an OS error (record too large, not encodable, bad file).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        errno: int | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.errno = errno
        self.durable = durable

    def __str__(self) -> str:
        return self.message if self.path is None else f"{self.path}: {self.message}"


class StoreOpenError(RuntimeError):
    """A store the broker needs at start-up (its state log, the claim store, a bridge's queue
    log) cannot be created or opened; the message names the file and the key to set.

    Not a :class:`StoreError`: no handler of a failed write may catch it; ``edge-broker run``
    prints it and exits 1."""
