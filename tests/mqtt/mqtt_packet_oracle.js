// A line server around mqtt-packet (the codec inside MQTT.js), used by test_codec_mqttjs.py.
// Each request is one JSON line: {"op": "parse", "version": 5, "hex": "..."} or
// {"op": "generate", "version": 5, "packet": {...}} (Buffers as {"hex": "..."}).
// Each answer is one JSON line: {"packets": [...]} / {"hex": "..."} / {"error": "..."}.
"use strict";
const path = require("path");
const readline = require("readline");
const mqttPacket = require(path.resolve(process.argv[2], "mqtt-packet"));

function toJson(value) {
  if (Buffer.isBuffer(value)) return { hex: value.toString("hex") };
  if (Array.isArray(value)) return value.map(toJson);
  if (value && typeof value === "object") {
    const out = Object.create(null); // keeps a "__proto__" user property an ordinary key
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = toJson(v);
    return out;
  }
  return value;
}

function fromJson(value) {
  if (Array.isArray(value)) return value.map(fromJson);
  if (value && typeof value === "object") {
    if (Object.keys(value).length === 1 && typeof value.hex === "string") {
      return Buffer.from(value.hex, "hex");
    }
    const out = Object.create(null); // keeps a "__proto__" user property an ordinary key
    for (const [k, v] of Object.entries(value)) out[k] = fromJson(v);
    return out;
  }
  return value;
}

function handle(request) {
  const opts = { protocolVersion: request.version };
  if (request.op === "generate") {
    return { hex: mqttPacket.generate(fromJson(request.packet), opts).toString("hex") };
  }
  const parser = mqttPacket.parser(opts);
  const packets = [];
  let error = null;
  parser.on("packet", (p) => packets.push(toJson(p)));
  parser.on("error", (e) => { error = String(e && e.message ? e.message : e); });
  parser.parse(Buffer.from(request.hex, "hex"));
  return error ? { error, packets } : { packets };
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let answer;
  try {
    answer = handle(JSON.parse(line));
  } catch (e) {
    answer = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
