// Runs a Python script under real MicroPython (WebAssembly port) with host directories copied
// into its in-memory filesystem. Usage:
//   node run.mjs HEAP_BYTES SCRIPT.py [HOST_DIR=MP_DIR ...]
// Exit code 0 when the script ran to the end, 1 when it raised (the traceback goes to stderr).
import { loadWithMounts, runScript } from "./mp_load.mjs";

const [heapArg, script, ...mounts] = process.argv.slice(2);
runScript(await loadWithMounts(heapArg, mounts), script);
