"""SHA-512 (FIPS 180-4) for boards whose hashlib has no sha512.

Ed25519 (RFC 8032 §5.1) hashes with SHA-512. MicroPython's hashlib usually offers only sha256,
so this module ships a compact pure-Python implementation and uses the native one when the
port has it. Python ints stand in for 64-bit words (MicroPython ints are arbitrary precision).
"""

import hashlib
import struct

_native = getattr(hashlib, "sha512", None)  # None on most MicroPython ports

_M = 0xFFFFFFFFFFFFFFFF

_K = (
    0x428A2F98D728AE22,
    0x7137449123EF65CD,
    0xB5C0FBCFEC4D3B2F,
    0xE9B5DBA58189DBBC,
    0x3956C25BF348B538,
    0x59F111F1B605D019,
    0x923F82A4AF194F9B,
    0xAB1C5ED5DA6D8118,
    0xD807AA98A3030242,
    0x12835B0145706FBE,
    0x243185BE4EE4B28C,
    0x550C7DC3D5FFB4E2,
    0x72BE5D74F27B896F,
    0x80DEB1FE3B1696B1,
    0x9BDC06A725C71235,
    0xC19BF174CF692694,
    0xE49B69C19EF14AD2,
    0xEFBE4786384F25E3,
    0x0FC19DC68B8CD5B5,
    0x240CA1CC77AC9C65,
    0x2DE92C6F592B0275,
    0x4A7484AA6EA6E483,
    0x5CB0A9DCBD41FBD4,
    0x76F988DA831153B5,
    0x983E5152EE66DFAB,
    0xA831C66D2DB43210,
    0xB00327C898FB213F,
    0xBF597FC7BEEF0EE4,
    0xC6E00BF33DA88FC2,
    0xD5A79147930AA725,
    0x06CA6351E003826F,
    0x142929670A0E6E70,
    0x27B70A8546D22FFC,
    0x2E1B21385C26C926,
    0x4D2C6DFC5AC42AED,
    0x53380D139D95B3DF,
    0x650A73548BAF63DE,
    0x766A0ABB3C77B2A8,
    0x81C2C92E47EDAEE6,
    0x92722C851482353B,
    0xA2BFE8A14CF10364,
    0xA81A664BBC423001,
    0xC24B8B70D0F89791,
    0xC76C51A30654BE30,
    0xD192E819D6EF5218,
    0xD69906245565A910,
    0xF40E35855771202A,
    0x106AA07032BBD1B8,
    0x19A4C116B8D2D0C8,
    0x1E376C085141AB53,
    0x2748774CDF8EEB99,
    0x34B0BCB5E19B48A8,
    0x391C0CB3C5C95A63,
    0x4ED8AA4AE3418ACB,
    0x5B9CCA4F7763E373,
    0x682E6FF3D6B2B8A3,
    0x748F82EE5DEFB2FC,
    0x78A5636F43172F60,
    0x84C87814A1F0AB72,
    0x8CC702081A6439EC,
    0x90BEFFFA23631E28,
    0xA4506CEBDE82BDE9,
    0xBEF9A3F7B2C67915,
    0xC67178F2E372532B,
    0xCA273ECEEA26619C,
    0xD186B8C721C0C207,
    0xEADA7DD6CDE0EB1E,
    0xF57D4F7FEE6ED178,
    0x06F067AA72176FBA,
    0x0A637DC5A2C898A6,
    0x113F9804BEF90DAE,
    0x1B710B35131C471B,
    0x28DB77F523047D84,
    0x32CAAB7B40C72493,
    0x3C9EBE0A15C9BEBC,
    0x431D67C49C100D4C,
    0x4CC5D4BECB3E42B6,
    0x597F299CFC657E2A,
    0x5FCB6FAB3AD6FAEC,
    0x6C44198C4A475817,
)

_IV = (
    0x6A09E667F3BCC908,
    0xBB67AE8584CAA73B,
    0x3C6EF372FE94F82B,
    0xA54FF53A5F1D36F1,
    0x510E527FADE682D1,
    0x9B05688C2B3E6C1F,
    0x1F83D9ABFB41BD6B,
    0x5BE0CD19137E2179,
)


def _compress(h: list[int], block: bytes, w: list[int]) -> list[int]:
    """One SHA-512 compression (FIPS 180-4 §6.4.2); ``w`` is a reused 80-entry list."""
    w[0:16] = struct.unpack(">16Q", block)
    for t in range(16, 80):
        x = w[t - 15]
        y = w[t - 2]
        s0 = ((x >> 1) | (x << 63)) ^ ((x >> 8) | (x << 56)) ^ (x >> 7)
        s1 = ((y >> 19) | (y << 45)) ^ ((y >> 61) | (y << 3)) ^ (y >> 6)
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) & _M
    a, b, c, d, e, f, g, hh = h
    for t in range(80):
        s1 = ((e >> 14) | (e << 50)) ^ ((e >> 18) | (e << 46)) ^ ((e >> 41) | (e << 23))
        t1 = hh + (s1 & _M) + ((e & f) ^ (~e & g)) + _K[t] + w[t]
        s0 = ((a >> 28) | (a << 36)) ^ ((a >> 34) | (a << 30)) ^ ((a >> 39) | (a << 25))
        t2 = (s0 & _M) + ((a & b) ^ (a & c) ^ (b & c))
        hh = g
        g = f
        f = e
        e = (d + t1) & _M
        d = c
        c = b
        b = a
        a = (t1 + t2) & _M
    return [(x + y) & _M for x, y in zip(h, (a, b, c, d, e, f, g, hh))]


def sha512_pure(data: bytes | bytearray | memoryview) -> bytes:
    """SHA-512 digest (64 bytes) of ``data`` in pure Python."""
    data = bytes(data)
    n = len(data)
    # padding: 0x80, zeros, then the 128-bit big-endian bit length (FIPS 180-4 §5.1.2)
    pad = b"\x80" + bytes((111 - n) % 128) + struct.pack(">QQ", 0, n * 8)
    h = list(_IV)
    w = [0] * 80
    full = n - n % 128
    for i in range(0, full, 128):
        h = _compress(h, data[i : i + 128], w)
    tail = data[full:] + pad
    for i in range(0, len(tail), 128):
        h = _compress(h, tail[i : i + 128], w)
    return struct.pack(">8Q", *h)


def sha512(data: bytes | bytearray | memoryview) -> bytes:
    """SHA-512 digest of ``data``: the port's native hashlib.sha512 when present."""
    if _native is not None:
        digest: bytes = _native(data).digest()
        return digest
    return sha512_pure(data)
