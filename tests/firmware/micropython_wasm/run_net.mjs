// Runs a Python script under real MicroPython (WebAssembly port) WITH a real TCP socket, so the
// firmware client can talk to the real broker. Usage (as run.mjs):
//   node run_net.mjs HEAP_BYTES SCRIPT.py [HOST_DIR=MP_DIR ...]
//
// MicroPython's code is synchronous (a blocking socket, select.poll) and Node has no blocking
// TCP. So MicroPython runs in a worker thread and calls globalThis.mpnet.*; each call posts a
// request to the main thread, which owns the net.Socket, and blocks with Atomics.wait on a
// SharedArrayBuffer until the main thread has written the answer there. The Python side of this
// is real_net/socket.py. Exit code 0 when the script ran to the end, 1 when it raised.
import net from "node:net";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

const DATA_BYTES = 1 << 20;
// ctrl[0]: 0 = waiting, 1 = answered; ctrl[1]: answer length; ctrl[2]: status
const OK = 0, TIMEOUT = 1, CLOSED = 2, ERROR = 3;

if (isMainThread) {
  const sab = new SharedArrayBuffer(16 + DATA_BYTES);
  const ctrl = new Int32Array(sab, 0, 4);
  const data = new Uint8Array(sab, 16);
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { argv: process.argv.slice(2), sab },
  });
  let sock = null;
  let inbox = Buffer.alloc(0);
  let closed = false;
  let pending = null; // a recv/poll waiting for data: {op, n, timer}

  function answer(status, bytes) {
    const b = bytes || Buffer.alloc(0);
    data.set(b.subarray(0, DATA_BYTES));
    ctrl[1] = Math.min(b.length, DATA_BYTES);
    ctrl[2] = status;
    Atomics.store(ctrl, 0, 1);
    Atomics.notify(ctrl, 0);
  }

  function serve() { // answer a waiting recv/poll if data or EOF is there
    if (!pending || (!inbox.length && !closed)) return;
    const { op, n, timer } = pending;
    pending = null;
    if (timer) clearTimeout(timer);
    if (op === "poll") return answer(OK, Buffer.from([inbox.length || closed ? 1 : 0]));
    if (!inbox.length) return answer(CLOSED);
    const chunk = inbox.subarray(0, n);
    inbox = inbox.subarray(chunk.length);
    answer(OK, Buffer.from(chunk));
  }

  worker.on("message", (req) => {
    if (req.op === "connect") {
      sock = net.connect({ host: req.host, port: req.port });
      sock.setNoDelay(true);
      sock.once("connect", () => answer(OK));
      sock.once("error", (err) => {
        if (!closed) { closed = true; if (!sock.connecting) serve(); }
        if (ctrl[0] === 0 && !pending) answer(ERROR, Buffer.from(String(err.message)));
      });
      sock.on("data", (chunk) => { inbox = Buffer.concat([inbox, chunk]); serve(); });
      sock.on("close", () => { closed = true; serve(); });
    } else if (req.op === "send") {
      if (closed || !sock) return answer(CLOSED);
      sock.write(Buffer.from(req.hex, "hex"));
      answer(OK);
    } else if (req.op === "recv" || req.op === "poll") {
      pending = { op: req.op, n: req.n };
      if (inbox.length || closed) return serve();
      if (req.timeout >= 0) {
        pending.timer = setTimeout(() => {
          const op = pending.op;
          pending = null;
          answer(op === "poll" ? OK : TIMEOUT, op === "poll" ? Buffer.from([0]) : null);
        }, req.timeout);
      }
    } else if (req.op === "close") {
      if (sock) sock.destroy();
      closed = true;
      answer(OK);
    }
  });
  worker.on("error", (err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
  worker.on("exit", (code) => { if (sock) sock.destroy(); process.exit(code); });
} else {
  const { argv, sab } = workerData;
  const [heapArg, script, ...mounts] = argv;
  const ctrl = new Int32Array(sab, 0, 4);
  const data = new Uint8Array(sab, 16);
  const decoder = new TextDecoder();

  function call(req) {
    Atomics.store(ctrl, 0, 0);
    parentPort.postMessage(req);
    Atomics.wait(ctrl, 0, 0);
    return { status: ctrl[2], bytes: data.slice(0, ctrl[1]) };
  }
  // Only ints cross between Python and JS: this MicroPython build keeps every str or bytes
  // object that crosses (either way) in its proxy table, never freed, which would falsify the
  // heap figures the test measures. So bytes go one int at a time: put(b) then send() out,
  // recv() stages what arrived and byte(i) reads it back.
  let staged = new Uint8Array(0);
  let lastError = "";
  let outgoing = [];
  globalThis.mpnet = {
    connect(host, port) {
      const r = call({ op: "connect", host, port: Number(port) });
      lastError = r.status === OK ? "" : decoder.decode(r.bytes);
      return r.status === OK ? 0 : -1;
    },
    error() { return lastError; },  // only read on failure
    put(b) { outgoing.push(b); return 0; },  // one byte of the next send
    send() {
      const h = Buffer.from(outgoing).toString("hex");
      outgoing = [];
      return call({ op: "send", hex: h }).status === OK ? 0 : -2;
    },
    recv(n, timeoutMs) {  // >= 0: bytes staged; -1 timeout; -2 closed
      const r = call({ op: "recv", n: Number(n), timeout: Number(timeoutMs) });
      if (r.status === TIMEOUT) return -1;
      if (r.status !== OK) return -2;
      staged = r.bytes;
      return staged.length;
    },
    byte(i) { return staged[i]; },
    poll(timeoutMs) { return call({ op: "poll", timeout: Number(timeoutMs) }).bytes[0] ? 1 : 0; },
    close() { call({ op: "close" }); return 0; },
  };

  const { loadWithMounts, runScript } = await import("./mp_load.mjs");
  runScript(await loadWithMounts(heapArg, mounts), script);
  process.exit(0);
}
