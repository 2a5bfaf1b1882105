"""The firmware's Ed25519 (smokermqtt/ed25519.py) agrees with libsodium (pynacl).

RFC 8032 §7.1 vectors, random seeds and messages, the base-point multiplication on its own, and
the comb table it ships, recomputed here with libsodium's scalar multiplication.
"""

from __future__ import annotations

import nacl.bindings
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smokermqtt import ed25519

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493

# RFC 8032 §7.1 TEST 1, 2, 3 and TEST SHA(abc): (secret key, public key, message, signature)
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
        "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
    (
        "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
        "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
        "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032)
def test_rfc8032_vectors(secret: str, public: str, message: str, signature: str) -> None:
    key = ed25519.SigningKey(bytes.fromhex(secret))
    msg = bytes.fromhex(message)
    assert key.public_key.hex() == public
    assert key.sign(msg).hex() == signature
    assert key.sign_attached(msg) == bytes.fromhex(signature) + msg
    # and libsodium says the same
    assert nacl.signing.SigningKey(bytes.fromhex(secret)).sign(msg) == key.sign_attached(msg)


@settings(max_examples=60, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=300))
def test_agrees_with_libsodium(seed: bytes, message: bytes) -> None:
    ours = ed25519.SigningKey(seed)
    theirs = nacl.signing.SigningKey(seed)
    assert ours.public_key == bytes(theirs.verify_key)
    assert ours.sign_attached(message) == bytes(theirs.sign(message))
    theirs.verify_key.verify(message, ours.sign(message))


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=L - 1))
def test_scalarmult_base_agrees_with_libsodium(k: int) -> None:
    expected = nacl.bindings.crypto_scalarmult_ed25519_base_noclamp(k.to_bytes(32, "little"))
    assert ed25519.scalarmult_base(k) == expected


def test_scalarmult_base_edges() -> None:
    assert ed25519.scalarmult_base(0) == (1).to_bytes(32, "little")  # the neutral element
    assert ed25519.scalarmult_base(L) == (1).to_bytes(32, "little")  # B has order L
    top = 2**256 - 1  # every comb column and tooth set
    expected = nacl.bindings.crypto_scalarmult_ed25519_base_noclamp(
        (top % L).to_bytes(32, "little")
    )
    assert ed25519.scalarmult_base(top) == expected


def test_comb_table_matches_libsodium() -> None:
    d = (-121665 * pow(121666, P - 2, P)) % P
    assert ed25519._D2 == 2 * d % P
    assert len(ed25519._COMB) == 15
    for j in range(1, 16):
        k = sum(1 << (64 * i) for i in range(4) if j >> i & 1)
        expected = nacl.bindings.crypto_scalarmult_ed25519_base_noclamp(k.to_bytes(32, "little"))
        ypx, ymx, xy2d = ed25519._COMB[j - 1]
        half = pow(2, P - 2, P)
        x = (ypx - ymx) * half % P
        y = (ypx + ymx) * half % P
        assert (y | ((x & 1) << 255)).to_bytes(32, "little") == expected, j
        assert xy2d == 2 * d * x * y % P, j


def test_inverse_without_three_argument_pow() -> None:
    for z in (1, 2, 19, P - 1, 2**200 + 12345):
        assert ed25519._inverse_slow(z) == pow(z, P - 2, P)
        assert ed25519._inverse_slow(z) * z % P == 1


def test_seed_length_is_checked() -> None:
    with pytest.raises(ValueError, match="32 bytes, got 31"):
        ed25519.SigningKey(b"\x00" * 31)
