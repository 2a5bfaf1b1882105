"""CPython stand-in for MicroPython's utime: the tick functions the firmware uses.

Only the tests put tests/firmware/shims on sys.path; the firmware imports ``utime`` first and
falls back to ``time`` on boards that dropped the u-prefixed names.
"""

import time as _time

_PERIOD = 1 << 30  # MicroPython's ticks wrap at TICKS_PERIOD = 2**30 on most ports


def ticks_ms() -> int:
    return int(_time.monotonic() * 1000) % _PERIOD


def ticks_add(ticks: int, delta: int) -> int:
    return (ticks + delta) % _PERIOD


def ticks_diff(end: int, start: int) -> int:
    d = (end - start) % _PERIOD
    return d - _PERIOD if d >= _PERIOD // 2 else d


def sleep_ms(ms: int) -> None:
    _time.sleep(ms / 1000)


def sleep(seconds: float) -> None:
    _time.sleep(seconds)


def time() -> int:
    return int(_time.time())
