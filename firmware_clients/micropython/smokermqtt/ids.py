"""SMOKER client IDs (SMOKER.md "Identity"): RFC 4648 base32 of the Ed25519 public key.

Upper case with '=' padding, always 56 characters ending in '===='. MicroPython has no
base64.b32encode, so the 5-bit regrouping is written out here.
"""

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def b32encode(data: bytes) -> str:
    """RFC 4648 §6 base32, upper case, padded with '=' to a multiple of 8 characters."""
    out = []
    acc = 0
    bits = 0
    for byte in data:
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append(_ALPHABET[(acc >> bits) & 31])
    if bits:
        out.append(_ALPHABET[(acc << (5 - bits)) & 31])
    out.append("=" * (-len(out) % 8))
    return "".join(out)


def b32decode(text: str) -> bytes:
    """Inverse of b32encode; ValueError names the first character that is not base32."""
    body = text.rstrip("=")
    if len(text) % 8 or len(text) - len(body) not in (0, 1, 3, 4, 6):
        raise ValueError("base32 text must be padded with '=' to a multiple of 8: %r" % text)
    out = bytearray()
    acc = 0
    bits = 0
    for i, ch in enumerate(body):
        v = _ALPHABET.find(ch)
        if v < 0:
            raise ValueError("character %r at %d of %r is not upper-case base32" % (ch, i, text))
        acc = ((acc << 5) | v) & 0xFFF
        bits += 5
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    if acc & ((1 << bits) - 1):
        raise ValueError("base32 text %r has non-zero padding bits" % text)
    return bytes(out)


def client_id(public_key: bytes) -> str:
    """The SMOKER client ID of a 32-byte Ed25519 public key."""
    if len(public_key) != 32:
        raise ValueError("an Ed25519 public key has 32 bytes, got %d" % len(public_key))
    return b32encode(public_key)


def public_key(smoker_id: str) -> bytes:
    """The 32-byte public key inside a SMOKER client ID; ValueError if it is not one."""
    if len(smoker_id) != 56 or not smoker_id.endswith("===="):
        raise ValueError("a SMOKER client ID has 56 characters ending in '====': %r" % smoker_id)
    return b32decode(smoker_id)
