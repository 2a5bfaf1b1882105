"""The configured bounds of ``[limits]`` and what enforces them: file descriptors and connections,
pre-authentication admission, publish quotas, topic lengths, retained messages, the shared read
pool and write buffers, and the counters of every time a bound refused something
(docs/limits-memory.md).
"""
