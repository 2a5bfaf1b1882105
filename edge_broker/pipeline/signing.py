"""Bundles in two steps so that the cloud's signing key never leaves the driver.

:func:`bundle_body` (run on the executors, no key) encodes the canonical CBOR body exactly as
``edge_broker.sync.bundle.create_bundle`` does; :func:`sign_body` (run on the driver only) signs
it and wraps the envelope. ``sign_body(key, bundle_body(...))`` is byte-for-byte
``create_bundle(key, ...)`` (tests/pipeline/test_pipeline_compile.py compares them with
``edge-broker bundle create``): the format constants and checks are the sync module's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cbor2


def bundle_body(*, version: int, gateway: str, issued_at: int, policy: Mapping[str, Any]) -> bytes:
    """The canonical, unsigned body of a policy bundle (safe to compute anywhere)."""
    from ..sync.bundle import BODY_FORMAT, _check_header, _check_policy

    _check_header(version, gateway, issued_at)
    return bytes(
        cbor2.dumps(
            {
                "format": BODY_FORMAT,
                "version": version,
                "gateway": gateway,
                "issued_at": issued_at,
                "policy": _check_policy(policy),
            },
            canonical=True,
        )
    )


def sign_body(signing_key: Any, body: bytes) -> bytes:
    """The signed envelope around ``body`` (``create_bundle``'s second half)."""
    from ..sync.bundle import ENVELOPE_FORMAT, MAX_BUNDLE_BYTES, BundleError, key_id

    envelope = {
        "format": ENVELOPE_FORMAT,
        "kid": key_id(signing_key.verify_key),
        "body": bytes(body),
        "sig": signing_key.sign(bytes(body)).signature,
    }
    data = bytes(cbor2.dumps(envelope, canonical=True))
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"bundle is {len(data)} bytes; the limit is {MAX_BUNDLE_BYTES}")
    return data
