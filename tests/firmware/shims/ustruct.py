"""CPython stand-in for MicroPython's ustruct (used by umqtt.simple)."""

from struct import *  # noqa: F403
from struct import pack_into, unpack_from  # noqa: F401
