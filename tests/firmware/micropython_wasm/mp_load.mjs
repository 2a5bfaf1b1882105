// What run.mjs and run_net.mjs share: load the MicroPython WebAssembly port, copy host
// directories into its in-memory filesystem, and run a script in #@step parts.
import fs from "node:fs";
import path from "node:path";
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript/micropython.mjs";

// heap: bytes; mounts: ["HOST_DIR=MP_DIR", ...]
export async function loadWithMounts(heap, mounts) {
  const mp = await loadMicroPython({
    heapsize: Number(heap),
    stdout: (line) => process.stdout.write(line + "\n"),
    stderr: (line) => process.stderr.write(line + "\n"),
  });
  for (const m of mounts) {
    const eq = m.indexOf("=");
    copyTree(mp, m.slice(0, eq), m.slice(eq + 1));
  }
  return mp;
}

function copyTree(mp, hostDir, mpDir) {
  mp.FS.mkdirTree(mpDir);
  for (const entry of fs.readdirSync(hostDir, { withFileTypes: true })) {
    const host = path.join(hostDir, entry.name);
    const inner = mpDir + "/" + entry.name;
    if (entry.isDirectory()) {
      if (entry.name !== "__pycache__") copyTree(mp, host, inner);
    } else {
      mp.FS.writeFile(inner, fs.readFileSync(host));
    }
  }
}

// A line "#@step" splits the script into parts run one after another in the same interpreter.
// The port's garbage collector scans stale stack memory of the running call conservatively, so
// gc.collect() inside one long call keeps dead objects alive; at the start of a new part it frees
// them, and gc.mem_alloc() there is the true live heap. Exit code 0 when the script ran to the
// end, 1 when it raised (the traceback goes to stderr).
export function runScript(mp, scriptPath) {
  try {
    for (const part of fs.readFileSync(scriptPath, "utf8").split(/^#@step.*$/m)) mp.runPython(part);
  } catch (err) {
    process.stderr.write(String(err && err.message ? err.message : err) + "\n");
    process.exit(1);
  }
}
