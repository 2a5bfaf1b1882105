"""The parts that keep a login storm inside the memory budget (issue 16): hashing parameters
for new hashes, old hashes still verifying, the verified-credential cache and the hash slots."""

from __future__ import annotations

import asyncio

import nacl.pwhash
import pytest

from edge_broker.auth.credential_cache import CredentialCache
from edge_broker.auth.hash_slots import HashSlots, SlotsFull, hash_memory_kib
from edge_broker.auth.password import PasswordEntry, hash_password, verify_password


def test_new_hashes_use_the_small_memory_parameters_and_old_ones_still_verify() -> None:
    new = hash_password("pw")
    assert b"$m=7168,t=5,p=1$" in new and hash_memory_kib(new) == 7168
    old = nacl.pwhash.argon2id.str(b"pw", opslimit=2, memlimit=64 * 1024 * 1024)
    assert hash_memory_kib(old) == 65536
    assert verify_password(PasswordEntry("u", old), b"pw")
    assert not verify_password(PasswordEntry("u", old), b"other")


def test_cache_remembers_exact_user_password_and_entry_only() -> None:
    cache = CredentialCache(10)
    cache.remember("alice", b"secret", b"$argon2id$h1")
    assert cache.verified("alice", b"secret", b"$argon2id$h1")
    assert not cache.verified("alice", b"secret2", b"$argon2id$h1")
    assert not cache.verified("alice", b"secret", b"$argon2id$h2")  # password changed in the file
    assert not cache.verified("alicesecret", b"", b"$argon2id$h1")  # fields cannot run together
    assert not cache.verified("alic", b"esecret", b"$argon2id$h1")
    assert not CredentialCache(10).verified("alice", b"secret", b"$argon2id$h1")  # new key


def test_cache_keeps_only_keyed_digests_and_is_bounded() -> None:
    cache = CredentialCache(3, key=b"k" * 32)
    for i in range(5):
        cache.remember(f"u{i}", b"password-%d" % i, b"h")
    assert len(cache) == 3
    assert not cache.verified("u0", b"password-0", b"h")  # least recently used went first
    assert cache.verified("u4", b"password-4", b"h")
    held = b"".join(cache._digests)
    assert b"password" not in held and b"u4" not in held
    off = CredentialCache(0)
    off.remember("u", b"p", b"h")
    assert not off.verified("u", b"p", b"h") and len(off) == 0


async def test_slots_bound_count_and_memory_first_come_first_served() -> None:
    slots = HashSlots(max_concurrent=3, max_memory_kib=20_000, max_waiting=10)
    a = await slots.acquire(7168)
    b = await slots.acquire(7168)
    big = asyncio.ensure_future(slots.acquire(65536))  # over the budget: must run alone
    small = asyncio.ensure_future(slots.acquire(7168))  # queued behind it, not overtaking
    await asyncio.sleep(0)
    assert not big.done() and not small.done() and slots.waiting == 2
    slots.release(a)
    await asyncio.sleep(0)
    assert not big.done()
    slots.release(b)
    await asyncio.sleep(0)
    assert big.done() and big.result() == 20_000 and not small.done()
    slots.release(big.result())
    await asyncio.sleep(0)
    assert small.done()


async def test_slots_refuse_past_max_waiting_and_forget_cancelled_waiters() -> None:
    slots = HashSlots(max_concurrent=1, max_memory_kib=65536, max_waiting=1)
    held = await slots.acquire(7168)
    waiter = asyncio.ensure_future(slots.acquire(7168))
    await asyncio.sleep(0)
    with pytest.raises(SlotsFull):
        await slots.acquire(7168)
    waiter.cancel()
    await asyncio.sleep(0)
    assert slots.waiting == 0
    slots.release(held)
    assert (await slots.acquire(7168)) == 7168
