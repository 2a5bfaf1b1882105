"""The firmware's pure-Python SHA-512 (smokermqtt/sha512.py) agrees with hashlib."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from smokermqtt.sha512 import sha512, sha512_pure

# FIPS 180-4 examples (NIST CSRC "SHA512.pdf") and the empty string
VECTORS = [
    (
        b"",
        "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
        "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
    ),
    (
        b"abc",
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
    ),
    (
        b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
        b"klmnopqrlmnopqrsmnopqrstnopqrstu",
        "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
        "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909",
    ),
]


def test_fips_vectors() -> None:
    for message, digest in VECTORS:
        assert sha512_pure(message).hex() == digest
        assert sha512(message).hex() == digest


def test_every_length_around_the_block_boundaries() -> None:
    # the padding has special cases at 111/112 bytes mod 128 and at whole blocks
    data = bytes(range(256)) * 2
    for n in range(0, 300):
        assert sha512_pure(data[:n]) == hashlib.sha512(data[:n]).digest(), n


def test_accepts_bytearray_and_memoryview() -> None:
    data = bytearray(b"x" * 200)
    assert sha512_pure(data) == sha512_pure(memoryview(data)) == hashlib.sha512(data).digest()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1000))
def test_agrees_with_hashlib(data: bytes) -> None:
    assert sha512_pure(data) == hashlib.sha512(data).digest()
