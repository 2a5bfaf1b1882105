"""The codec's wire spelling of shared subscriptions and the UTF-8 payload check (MQTT 5
§4.8.2, §3.3.2.3.2).

Topic names and filters are validated by ``edge_broker.matching`` (``validate_topic_name``,
``validate_topic_filter``, ``parse_shared``), the one definition gate 1 applies; the decoder
itself refuses only what makes a packet malformed (a wildcard or U+0000 in a PUBLISH topic).
"""

from __future__ import annotations

SHARE_PREFIX = "$share/"


def payload_is_valid_utf8(payload: bytes) -> bool:
    """True if ``payload`` is well-formed UTF-8 (Payload Format Indicator 1, MQTT 5 §3.3.2.3.2).

    Python's strict decoder rejects overlong forms, encoded surrogates and code points beyond
    U+10FFFF, which is what the Unicode definition of well-formed UTF-8 requires.
    """
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
