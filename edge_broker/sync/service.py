"""Policy sync and audit upload on the gateway (DESIGN.md "cloud policy sync"; issue 9).

:class:`SyncService` owns the trusted keys, the sync state directory, and (``source = "mqtt"``)
a paho-mqtt client to the cloud broker running in its own thread (``loop_start``). Everything
the client receives is handed to the broker's event loop with ``call_soon_threadsafe``; bundles
are handled one at a time:

1. verify the signature against ``[sync] trusted_keys`` (``bundle.verify_bundle``);
2. refuse a bundle for another gateway, and a version not newer than the applied one;
3. build the merged config and validate it (``sync.apply.merged_config``, in a thread);
4. compile and swap (``PolicyHost.apply_config``, the broker's: re-checks live subscriptions);
5. persist the bundle (atomic write + fsync) and report on ``edge/<gateway>/policy/status``
   (retained JSON: ``{"gateway", "version", "applied_version", "ok", "reason", "at"}``).

The applied bundle offered again byte for byte (the retained message after a reconnect or a
restart) is reported as ``ok`` ("already applied") and changes nothing.

Any failure keeps the running policy and is reported with the reason. On start,
:meth:`SyncService.restore` applies the persisted bundle before the broker serves, so a gateway
that restarts with its uplink down keeps the last policy it accepted.

``source = "directory"`` reads ``*.cbor`` files from ``[sync] directory`` (every
``poll_interval`` seconds; new or changed files only) and writes the status to
``<state_dir>/status.json``.

With ``audit_upload`` and an ``[audit] dir``, audit batches go to ``edge/<gateway>/audit`` over
the same client (``sync.upload``): QoS 1, one batch in flight. The cursor moves (and is saved)
only when a collector confirms the batch *stored* on ``edge/<gateway>/audit/stored`` (payload:
the batch id), never on the cloud broker's PUBACK: a PUBACK only says the broker took the
message, which it drops when no collector is subscribed. Unconfirmed, the batch is sent again
every ``STORED_WAIT`` seconds, and at once when a collector announces itself on
``edge/collectors/online`` (``edge-broker-pipeline collect`` does on every connect). So no batch
is lost whatever starts first, gateway or collector, and a collector restart costs no session
state on the cloud broker (docs: ``edge_broker/pipeline/README.md`` "collect").
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nacl.signing

from ..keys import load_verify_key
from ..store.damage import set_aside
from ..tls import client_context
from .apply import merged_config
from .bundle import (
    BundleError,
    PolicyBundle,
    check_acceptable,
    key_id,
    stored_damage,
    verify_bundle,
)
from .errors import SyncError
from .host import Applied, PolicyHost, Refused
from .state import BUNDLE_FILE, CURSOR_FILE, STATUS_FILE, SyncStateDir, SyncStateError, SyncStatus
from .upload import (
    COLLECTORS_ONLINE,
    AuditBatch,
    UploadStatus,
    audit_topic,
    next_batch,
    stored_topic,
)

if TYPE_CHECKING:
    import paho.mqtt.client as paho

    from ..config import Config
    from ..config.service import SyncConfig

log = logging.getLogger("edge_broker.sync")

UPLOAD_IDLE = 0.5  # seconds between looks at the audit log when nothing is pending
STORED_WAIT = 30.0  # seconds without a collector's "stored" before the batch is sent again


def policy_topic(gateway: str) -> str:
    return f"edge/{gateway}/policy"


def status_topic(gateway: str) -> str:
    return f"edge/{gateway}/policy/status"


def default_state_dir(config: Config) -> Path:
    if config.sync.state_dir:
        return Path(config.sync.state_dir)
    from ..store.state_dir import state_dir

    return state_dir(config) / "sync"


class SyncService:
    def __init__(self, broker: PolicyHost, base: Config) -> None:
        settings = base.sync
        self.broker = broker
        self.base = base
        self.settings: SyncConfig = settings
        self.gateway = settings.gateway_id
        self.status = SyncStatus()
        self.upload = UploadStatus()
        keys: dict[str, nacl.signing.VerifyKey] = {}
        for path in settings.trusted_keys:
            try:
                key = load_verify_key(path)
            except Exception as exc:
                raise SyncError(f"[sync] trusted_keys: cannot load {path}: {exc}") from exc
            keys[key_id(key)] = key
        self.trusted = keys
        try:
            self.state = SyncStateDir.open(default_state_dir(base))
        except SyncStateError as exc:
            raise SyncError(str(exc)) from exc
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: paho.Client | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._pending_mid: int | None = None
        self._pending_since = 0.0
        self._cursor: tuple[int, int] | None = None
        self._seen: dict[str, tuple[int, int]] = {}
        self._closing = False
        self._applied: bytes | None = None  # the applied bundle, byte for byte
        self._bundle: PolicyBundle | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def restore(self) -> None:
        """Apply the persisted bundle (before the broker serves).

        A gateway that had a bundle never falls back to its base config silently (issue 15
        item 10): the base file is often more permissive than the cloud's policy. When the saved
        bundle cannot be applied (the trusted key was rotated without keeping the old one, the
        gateway id or the base config changed, the file is damaged) this raises
        :class:`SyncError`, and the broker refuses to start with a message naming the file and
        the ways out. Refusing beats serving the last bundle unverified: a rotated key may mean
        the old one is compromised.
        """
        self._load_cursor()
        data = self.state.load_bundle()
        if data is None:
            return
        saved = self.state.path / BUNDLE_FILE
        damage = stored_damage(data, self.trusted)
        if damage is not None and self.base.persistence.on_damage == "set-aside":
            moved = set_aside(saved)
            log.error(
                "the saved policy bundle %s is damaged (%s): moved to %s; starting WITHOUT it, on "
                "the base config alone, until the cloud sends a bundle",
                saved,
                damage,
                moved,
                extra={"event": "store_set_aside", "path": str(saved), "moved_to": str(moved)},
            )
            return
        ok, reason, _ = await self.handle(data, persist=False, report=False)
        if ok:
            log.info(
                "policy bundle restored from %s: %s",
                self.state.path,
                reason,
                extra={"event": "bundle_restored", "version": self.status.version},
            )
            return
        log.error(
            "the persisted policy bundle %s cannot be applied: %s",
            saved,
            reason,
            extra={"event": "bundle_restore_failed"},
        )
        raise SyncError(
            f"the saved policy bundle {saved} cannot be applied ({reason}); this gateway had a "
            "cloud policy, so it does not start with the base config alone, which may allow "
            "more. Either add the public key that signed it to [sync] trusted_keys again (keep "
            "old and new keys trusted while rotating), or fix what changed ([sync] gateway_id, "
            f"the base config), or delete {saved} to start deliberately from the base config "
            "until the cloud sends a new bundle"
            + (
                ""
                if damage is None
                else "; the file is damaged: `edge-broker state set-aside --config FILE` moves it "
                'aside (or set [persistence] on_damage = "set-aside" to do so at start)'
            )
        )

    def _load_cursor(self) -> None:
        """The audit upload position (before the broker serves: a damaged cursor refuses the
        start, or is set aside under ``on_damage = "set-aside"``)."""
        if not (
            self.settings.source == "mqtt"
            and self.settings.audit_upload
            and self.broker.audit is not None
        ):
            return
        try:
            self._cursor = self.state.load_cursor()
        except SyncStateError as exc:
            if self.base.persistence.on_damage != "set-aside":
                raise SyncError(str(exc)) from exc
            cursor = self.state.path / CURSOR_FILE
            moved = set_aside(cursor)
            log.error(
                "the audit upload cursor %s is damaged: moved to %s; the upload starts "
                "again at the oldest audit record (the cloud may receive some twice)",
                cursor,
                moved,
                extra={
                    "event": "store_set_aside",
                    "path": str(cursor),
                    "moved_to": str(moved),
                },
            )

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.settings.source == "mqtt":
            self._start_client()
            if self.settings.audit_upload and self.broker.audit is None:
                log.warning(
                    "[sync] audit_upload: there is no audit log to upload; set [audit] dir",
                    extra={"event": "audit_upload_off"},
                )
            if self.settings.audit_upload and self.broker.audit is not None:
                self._spawn(self._upload_loop())
        elif self.settings.source == "directory":
            self._spawn(self._directory_loop())

    async def close(self) -> None:
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    def _spawn(self, coro: Any) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- bundles ------------------------------------------------------------------------------

    async def handle(
        self, data: bytes, *, persist: bool = True, report: bool = True
    ) -> tuple[bool, str, int | None]:
        """Verify, check, compile, swap, persist, report; (ok, reason, bundle version)."""
        async with self._lock:
            version: int | None = None
            if data == self._applied:  # the retained bundle again (reconnect, restart): no change
                reason = f"bundle v{self.status.version} is already applied"
                if report:
                    self._report(True, reason, self.status.version)
                return True, reason, self.status.version
            try:
                bundle = verify_bundle(data, self.trusted)
                version = bundle.version
                check_acceptable(bundle, self.gateway, self.status.version)
                ok, reason = await self._apply(bundle, persist)
            except BundleError as exc:
                ok, reason = False, str(exc)
            if ok and version is not None:
                self.status.success(version)
            else:
                self.status.failure(reason)
                log.error(
                    "policy bundle refused: %s",
                    reason,
                    extra={"event": "bundle_refused", "version": version},
                )
                if self.broker.audit is not None:
                    self.broker.audit.event("policy_rejected", detail=f"bundle: {reason}")
            if report:
                self._report(ok, reason, version)
            return ok, reason, version

    async def _apply(self, bundle: PolicyBundle, persist: bool) -> tuple[bool, str]:
        new = await asyncio.to_thread(merged_config, self.base, bundle, self.state)
        result = await self.broker.apply_config(new, f"policy bundle v{bundle.version}")
        if not result.ok:
            return False, result.message
        self._applied = bundle.raw
        self._bundle = bundle
        if persist:
            await asyncio.to_thread(self.state.save_bundle, bundle.raw)
        self.state.remove_password_files(keep=bundle.version)
        return True, result.message

    @property
    def bundle(self) -> PolicyBundle | None:
        """The applied policy bundle (version, signer key id), None before the first."""
        return self._bundle

    async def reload_base(self, path: str) -> Applied:
        """SIGHUP with sync running: the new config file, with the applied bundle's sections
        over it again (a reload must not silently drop the cloud's policy)."""
        from ..config import ConfigError, load_config

        async with self._lock:
            bundle = self._bundle
            try:
                new = await asyncio.to_thread(load_config, path)
            except ConfigError:
                return await self.broker.reload(
                    path
                )  # logs and audits every problem, keeps the policy
            if new.sync != self.base.sync:
                log.warning(
                    "reload of %s: [sync] changes take effect after a restart",
                    path,
                    extra={"event": "reload_sync_kept"},
                )
                new = replace(new, sync=self.base.sync)
            merged = new
            if bundle is not None:
                try:
                    merged = await asyncio.to_thread(merged_config, new, bundle, self.state)
                except BundleError as exc:
                    message = f"reload of {path} refused: {exc}; the running policy is kept"
                    log.error(message, extra={"event": "reload_refused"})
                    return Refused(message)
            source = f"reload of {path}" + (
                f" with policy bundle v{bundle.version}" if bundle else ""
            )
            result = await self.broker.apply_config(merged, source)
            if result.ok:
                self.base = new
            return result

    def _report(self, ok: bool, reason: str, version: int | None) -> None:
        status = {
            "gateway": self.gateway,
            "version": version,
            "applied_version": self.status.version,
            "ok": ok,
            "reason": reason,
            "at": round(time.time(), 3),
        }
        payload = json.dumps(status, separators=(",", ":")).encode()
        if self._client is not None:
            self._client.publish(status_topic(self.gateway), payload, qos=1, retain=True)
        else:
            try:
                from .state import atomic_write

                atomic_write(self.state.path / STATUS_FILE, payload + b"\n")
            except OSError as exc:
                log.error("cannot write %s: %s", self.state.path / STATUS_FILE, exc)

    # -- directory source ---------------------------------------------------------------------

    async def _directory_loop(self) -> None:
        directory = Path(self.settings.directory or ".")
        warned = False
        while True:
            if not directory.is_dir() and not warned:
                warned = True
                log.warning(
                    "[sync] directory %s does not exist (yet): no bundles to read",
                    directory,
                    extra={"event": "sync_directory_missing"},
                )
            try:
                entries = sorted(directory.glob("*.cbor"))
            except OSError as exc:
                log.error("cannot list %s: %s", directory, exc)
                entries = []
            for path in entries:
                try:
                    stat = path.stat()
                    mark = (stat.st_mtime_ns, stat.st_size)
                    if self._seen.get(path.name) == mark:
                        continue
                    data = path.read_bytes()
                except OSError:
                    continue
                self._seen[path.name] = mark
                await self.handle(data)
            await asyncio.sleep(self.settings.poll_interval)

    # -- MQTT uplink --------------------------------------------------------------------------

    def _start_client(self) -> None:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        s = self.settings
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=s.client_id or f"edge-broker-{self.gateway}",
            protocol=paho.MQTTv311,
            clean_session=True,
        )
        if s.username is not None:
            client.username_pw_set(s.username, s.password)
        if s.tls:
            client.tls_set_context(client_context(s.ca, s.cert, s.key))
        client.reconnect_delay_set(min_delay=min(1.0, s.reconnect_max), max_delay=s.reconnect_max)  # type: ignore[arg-type]
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        self._client = client
        client.connect_async(s.host, s.port, s.keepalive)
        client.loop_start()

    def _threadsafe(self, callback: Any, *args: Any) -> None:
        loop = self._loop
        if loop is not None and not self._closing and not loop.is_closed():
            loop.call_soon_threadsafe(callback, *args)

    def _on_connect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        if reason.is_failure:
            log.warning(
                "cloud broker refused the connection: %s", reason, extra={"event": "uplink_refused"}
            )
            return
        client.subscribe(policy_topic(self.gateway), qos=1)
        if self.settings.audit_upload and self.broker.audit is not None:
            client.subscribe([(stored_topic(self.gateway), 1), (COLLECTORS_ONLINE, 1)])
        self._threadsafe(self._set_connected, True)

    def _on_disconnect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        self._threadsafe(self._set_connected, False)

    def _set_connected(self, connected: bool) -> None:
        if connected != self.status.connected:
            log.info(
                "cloud uplink %s",
                "connected" if connected else "lost",
                extra={"event": "uplink_up" if connected else "uplink_down"},
            )
        self.status.connected = connected
        if connected and self.upload.pending is not None:
            # a "stored" sent while we were away is lost (clean session): ask again now
            self._send(self.upload.pending)

    def _on_message(self, client: paho.Client, userdata: Any, message: Any) -> None:
        if message.topic == policy_topic(self.gateway) and message.payload:
            self._threadsafe(self._spawn, self.handle(bytes(message.payload)))
        elif message.topic == stored_topic(self.gateway):
            self._threadsafe(self._stored, bytes(message.payload).decode("utf-8", "replace"))
        elif message.topic == COLLECTORS_ONLINE:
            self._threadsafe(self._collector_online)

    # -- audit upload -------------------------------------------------------------------------

    def _collector_online(self) -> None:
        """A collector (re)connected: what waits for a "stored" may have reached nobody."""
        if self.upload.pending is not None and self.status.connected:
            self._send(self.upload.pending)

    def _stored(self, batch_id: str) -> None:
        """A collector stored ``batch_id``: only now does the cursor move past it."""
        batch = self.upload.pending
        if batch is None or batch_id.strip() != batch.batch_id:
            return  # a late confirmation of an earlier batch, or of another sender's
        self.upload.pending = None
        self._pending_mid = None
        self._cursor = (batch.segment, batch.last)
        self.upload.batches_acked += 1
        self.upload.records_acked += batch.count
        self.upload.segments_lost += batch.lost_segments
        self._spawn(asyncio.to_thread(self.state.save_cursor, batch.segment, batch.last))

    async def _upload_loop(self) -> None:
        audit = self.broker.audit
        assert audit is not None
        while True:
            pending = self.upload.pending
            if pending is not None:
                if self.status.connected and time.monotonic() - self._pending_since > STORED_WAIT:
                    self._send(pending)  # no collector confirmed it stored: again
                await asyncio.sleep(UPLOAD_IDLE)
                continue
            if not self.status.connected:
                await asyncio.sleep(UPLOAD_IDLE)
                continue
            batch = await asyncio.to_thread(
                next_batch, audit.directory, self.gateway, self._cursor, self.settings.audit_batch
            )
            if batch is None:
                await asyncio.sleep(UPLOAD_IDLE)
                continue
            self.upload.pending = batch
            self._send(batch)

    def _send(self, batch: AuditBatch) -> None:
        assert self._client is not None
        info = self._client.publish(audit_topic(self.gateway), batch.payload, qos=1)
        self._pending_mid = info.mid
        self._pending_since = time.monotonic()
        log.debug(
            "audit batch %s sent (%d records)",
            batch.batch_id,
            batch.count,
            extra={"event": "audit_batch_sent", "batch": batch.batch_id},
        )
