// Runs a Python script under real MicroPython (WebAssembly port) with host directories copied
// into its in-memory filesystem. Usage:
//   node run.mjs HEAP_BYTES SCRIPT.py [HOST_DIR=MP_DIR ...]
// Exit code 0 when the script ran to the end, 1 when it raised (the traceback goes to stderr).
import fs from "node:fs";
import path from "node:path";
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";

const [heapArg, script, ...mounts] = process.argv.slice(2);
const mp = await loadMicroPython({
  heapsize: Number(heapArg),
  stdout: (line) => process.stdout.write(line + "\n"),
  stderr: (line) => process.stderr.write(line + "\n"),
});

function copyTree(hostDir, mpDir) {
  mp.FS.mkdirTree(mpDir);
  for (const entry of fs.readdirSync(hostDir, { withFileTypes: true })) {
    const host = path.join(hostDir, entry.name);
    const inner = mpDir + "/" + entry.name;
    if (entry.isDirectory()) {
      if (entry.name !== "__pycache__") copyTree(host, inner);
    } else {
      mp.FS.writeFile(inner, fs.readFileSync(host));
    }
  }
}

for (const m of mounts) {
  const eq = m.indexOf("=");
  copyTree(m.slice(0, eq), m.slice(eq + 1));
}
try {
  // A line "#@step" splits the script into parts run one after another in the same
  // interpreter. The port's garbage collector scans stale stack memory of the running call
  // conservatively, so gc.collect() inside one long call keeps dead objects alive; at the start
  // of a new part it frees them, and gc.mem_alloc() there is the true live heap.
  for (const part of fs.readFileSync(script, "utf8").split(/^#@step.*$/m)) mp.runPython(part);
} catch (err) {
  process.stderr.write(String(err && err.message ? err.message : err) + "\n");
  process.exit(1);
}
