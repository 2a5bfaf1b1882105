"""CPython stand-in for MicroPython's ubinascii (used by umqtt.simple)."""

from binascii import *  # noqa: F403
from binascii import hexlify, unhexlify  # noqa: F401
