"""Files of the pipeline jobs through Spark's Hadoop file system, never the driver's local disk.

Every input and output the user names is a Hadoop path or URI: ``file:///data/fleet``,
``hdfs://nn:8020/fleet``, ``s3a://bucket/report`` (with the hadoop-aws jar and credentials in
``--conf spark.hadoop.fs.s3a.*``), or a plain path, which Hadoop resolves on its default file
system (``fs.defaultFS``: the local disk on ``local[*]``, HDFS on a YARN cluster). The driver
only lists and writes through ``org.apache.hadoop.fs.FileSystem`` (the JVM Spark already runs),
so ``-o s3a://bucket/report`` writes to the bucket, not into a local folder named ``s3a:``.

Bulk data (tables, Parquet outputs) is read and written by the executors with Spark's
readers and writers; :func:`check_landed` then verifies from the driver that the executors'
files are visible where the job wrote them (a worker whose output folder is not shared with
the driver commits only ``_SUCCESS`` there; the job then fails instead of reporting success).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

from .spark import PipelineError

# where job input and output must be: the driver lists and checks them, the executors read and
# write them (a folder on one machine's own disk is not that, edge_broker/pipeline/README.md)
SHARED = "storage that the driver and every executor share (HDFS, S3 via s3a://, NFS)"
WRITER_THREADS = 8  # each small write is ~4 Py4J round trips of waiting, not Python work
WRITER_WINDOW = 256  # files queued or in flight at most: memory stays bounded while streaming


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for paths and URIs alike (not ``os.path``: ``s3a://b`` is no dir name)."""
    out = base.rstrip("/") or "/"
    for part in parts:
        out = f"{out}/{part.strip('/')}" if out != "/" else f"/{part.strip('/')}"
    return out


class Storage:
    """Listing, small reads and small writes on the driver through Hadoop's FileSystem."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        try:
            fs = path.getFileSystem(self._conf)
        except Exception as exc:  # py4j wraps the JVM's IOException (e.g. no FileSystem for scheme)
            raise PipelineError(
                f"{uri}: cannot open this file system: {_java_message(exc)}"
            ) from exc
        if fs.getScheme() == "file" and hasattr(fs, "setWriteChecksum"):  # a ChecksumFileSystem
            # no ".gw-1.cbor.crc" next to each bundle: a [sync] directory holds bundles only
            fs.setWriteChecksum(False)
        return fs, path

    def exists(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path))

    def is_dir(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path) and fs.getFileStatus(path).isDirectory())

    def qualified(self, uri: str) -> str:
        """The fully qualified URI (``file:/abs/path`` for a relative local path)."""
        fs, path = self._fs(uri)
        return str(fs.makeQualified(path).toString())

    def list_files(self, uri: str, suffix: str = "") -> list[str]:
        """Every file under ``uri`` (recursively) whose name ends with ``suffix``, sorted."""
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        found = []
        files = fs.listFiles(path, True)
        while files.hasNext():
            name = files.next().getPath().toString()
            if name.endswith(suffix):
                found.append(str(name))
        return sorted(found)

    def size(self, uri: str) -> int:
        """Bytes under ``uri`` (a file or a folder, recursively); 0 when it does not exist."""
        fs, path = self._fs(uri)
        return int(fs.getContentSummary(path).getLength()) if fs.exists(path) else 0

    def mkdirs(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.mkdirs(path)

    def write_bytes(self, uri: str, data: bytes) -> None:
        fs, path = self._fs(uri)
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        self.write_bytes(uri, text.encode("utf-8"))

    def read_bytes(self, uri: str, limit: int = 64 * 1024 * 1024) -> bytes:
        fs, path = self._fs(uri)
        if not fs.exists(path) or fs.getFileStatus(path).isDirectory():
            raise PipelineError(f"{uri}: no such file")
        size = int(fs.getFileStatus(path).getLen())
        if size > limit:
            raise PipelineError(f"{uri}: {size} bytes; more than the {limit} this job reads")
        stream = fs.open(path)
        try:
            buf = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 65536, False)
            return bytes(buf.toByteArray())
        finally:
            stream.close()

    def read_head(self, uri: str, limit: int) -> tuple[bytes, bool]:
        """(the first ``limit`` bytes of the file ``uri``, whether that is the whole file):
        enough for a CSV header without reading the table on the driver."""
        fs, path = self._fs(uri)
        stream = fs.open(path)
        try:
            data = bytes(stream.readNBytes(limit + 1))  # java.io.InputStream (Java 11+)
        finally:
            stream.close()
        return data[:limit], len(data) <= limit

    def has_part_file(self, uri: str) -> bool:
        """Whether a ``part-*`` data file is anywhere under ``uri``: the listing stops at the
        first one (a records folder holds one file per gateway and day, and each listed file
        is a few Py4J round trips: listing them all cost seconds per thousand files)."""
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return False
        files = fs.listFiles(path, True)
        while files.hasNext():
            if str(files.next().getPath().getName()).startswith("part-"):
                return True
        return False

    def check_landed(self, uri: str, what: str) -> None:
        """Fail unless the Parquet/JSON folder ``uri`` holds data files the driver can see."""
        if not self.has_part_file(uri):
            raise PipelineError(
                f"{uri}: the executors' {what} files are not there (only "
                f"{', '.join(f.rsplit('/', 1)[-1] for f in self.list_files(uri)) or 'nothing'}); "
                f"write to {SHARED}"
            )


class BulkWriter:
    """Many small files (one bundle per gateway) written through Hadoop by a pool of threads.

    One file through Hadoop is a handful of Py4J calls (create, write, close), each a round trip
    to the JVM that the driver spends waiting: written one after another (about 7 ms each on a
    loaded 2-core host), 3,000 bundles kept the driver busy for tens of seconds while every
    executor core sat idle. Two remedies: when ``base`` is on Hadoop's *local* file system
    (``file:`` or a plain path with the default ``fs.defaultFS``) the driver's own disk is the
    destination, so the file is written by Python directly at the same path Hadoop would use;
    otherwise (HDFS, S3, ...) a pool of threads overlaps the waits (Py4J gives each Python
    thread its own JVM connection) while the caller keeps signing. At most WRITER_WINDOW files
    are queued, and the first failed write is raised by the next :meth:`write` or by
    :meth:`close`. ``direct=False``: through Hadoop (and the threads) even for local files."""

    def __init__(
        self, storage: Storage, base: str, threads: int = WRITER_THREADS, direct: bool = True
    ) -> None:
        self._fs, path = storage._fs(base)  # resolved once: every file is under ``base``
        self._path = storage._jvm.org.apache.hadoop.fs.Path
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="pipeline-writer")
        self._pending: deque[Future[None]] = deque()
        self._local: tuple[str, str] | None = None  # (base as given, its local directory)
        if direct and self._fs.getScheme() == "file":
            local = str(self._fs.makeQualified(path).toUri().getPath())
            self._local = (base.rstrip("/"), local.rstrip("/"))
        self._made: set[str] = set()

    def write(self, uri: str, data: bytes) -> None:
        if self._local is not None and uri.startswith(self._local[0] + "/"):
            self._write_local(self._local[1] + uri[len(self._local[0]) :], data)
            return
        while self._pending and (len(self._pending) >= WRITER_WINDOW or self._pending[0].done()):
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(self._write, uri, data))

    def _write_local(self, target: str, data: bytes) -> None:
        folder = os.path.dirname(target)
        try:
            if folder not in self._made:
                os.makedirs(folder, exist_ok=True)
                self._made.add(folder)
            with open(target, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise PipelineError(f"{target}: cannot write: {exc.strerror or exc}") from exc

    def _write(self, uri: str, data: bytes) -> None:
        stream = self._fs.create(self._path(uri), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def close(self) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BulkWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
        else:  # already failing: stop the queued writes, keep the first error
            self._pool.shutdown(wait=True, cancel_futures=True)


def _java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.getMessage())
        except Exception:  # the JVM may be gone
            pass
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
