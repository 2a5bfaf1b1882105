// SMOKER with MQTT.js (MQTT 5) and libsodium-wrappers, as the TypeScript reference client does it:
// enhanced authentication (method "SMOKER", the nonce signed with crypto_sign), a signed claim on
// access/claim, subscribe, unclaim; plus the refusals. Driven by tests/claims/test_broker_claims_node.py.
// Usage: node smoker.js HOST PORT
// Prints one JSON object on stdout: {"ok": true, ...observations} or {"ok": false, "error": "..."}.
'use strict';
const mqtt = require('mqtt');
const sodium = require('libsodium-wrappers');

const [host, port] = process.argv.slice(2);
const url = `mqtt://${host}:${port}`;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

// RFC 4648 base32, upper case, with '=' padding: the SMOKER client ID of a public key.
function base32(bytes) {
  let bits = 0; let value = 0; let out = '';
  for (const b of bytes) {
    value = (value << 8) | b; bits += 8;
    while (bits >= 5) { out += ALPHABET[(value >>> (bits - 5)) & 31]; bits -= 5; }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  while (out.length % 8) out += '=';
  return out;
}

// JSON with keys sorted at every level and no whitespace: the bytes the owner signs.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function identity() {
  const keys = sodium.crypto_sign_keypair();
  return { ...keys, id: base32(keys.publicKey) };
}

function smokerClient(who, extra = {}) {
  const c = mqtt.connect(url, {
    protocolVersion: 5, clientId: who.id, reconnectPeriod: 0, clean: true,
    properties: { authenticationMethod: 'SMOKER' }, ...extra,
  });
  c.handleAuth = (packet, callback) => {
    const nonce = packet.properties.authenticationData;
    const signed = sodium.crypto_sign(new Uint8Array(nonce), who.privateKey);  // 64-byte sig + nonce
    callback(null, { cmd: 'auth', reasonCode: 0x18,
      properties: { authenticationMethod: 'SMOKER', authenticationData: Buffer.from(signed) } });
  };
  return c;
}

function connected(c) {
  return new Promise((resolve) => {
    c.once('connect', (connack) => resolve({ code: connack.reasonCode || 0, connack }));
    c.once('error', (err) => resolve({ code: err.code, error: err.message }));
    c.once('close', () => resolve({ code: -1, error: 'closed' }));
  });
}

async function publishCode(c, topic, payload) {
  try {
    const ack = await c.publishAsync(topic, payload, { qos: 1 });
    return ack && ack.reasonCode ? ack.reasonCode : 0;
  } catch (err) {
    return err.code;
  }
}

async function subscribeCodes(c, filter) {
  try {
    return (await c.subscribeAsync(filter, { qos: 1 })).map((g) => g.qos);
  } catch (err) {
    if (err.packet && err.packet.granted) return err.packet.granted;
    throw err;
  }
}

function claim(owner, restriction) {
  const signed = sodium.crypto_sign(Buffer.from(canonical(restriction), 'utf8'), owner.privateKey);
  // key order as the TypeScript client sends it; the broker must not depend on it
  return JSON.stringify({ restriction, signature: Buffer.from(signed).toString('base64') });
}

function messages(c) {
  const got = [];
  c.on('message', (topic, payload) => got.push([topic, payload.toString()]));
  return got;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  await sodium.ready;
  const owner = identity();
  const reader = identity();
  const out = {};

  const o = smokerClient(owner);
  const oc = await connected(o);
  out.ownerConnack = oc.code;
  out.ownerAuthMethod = oc.connack ? oc.connack.properties.authenticationMethod : null;
  const topic = `restricted/${owner.id}/temperature`;
  const restriction = {
    topicName: topic, restrictionType: 'WHITELIST',
    permissions: [{ clientId: reader.id, activity: 'SUBSCRIBE' }],
  };
  out.claim = await publishCode(o, 'access/claim', claim(owner, restriction));
  const tampered = JSON.parse(claim(owner, restriction));
  tampered.restriction.restrictionType = 'BLACKLIST';
  out.tampered = await publishCode(o, 'access/claim', JSON.stringify(tampered));

  const r = smokerClient(reader);
  out.readerConnack = (await connected(r)).code;
  const readerGot = messages(r);
  out.readerSuback = await subscribeCodes(r, topic);
  out.readerWildSuback = await subscribeCodes(r, 'restricted/+/temperature');
  out.readerPublish = await publishCode(r, topic, 'not mine');

  const plain = mqtt.connect(url, { protocolVersion: 5, clientId: `plain-${process.pid}`, reconnectPeriod: 0 });
  await connected(plain);
  const plainGot = messages(plain);
  await plain.subscribeAsync('#', { qos: 1 });
  out.plainSuback = await subscribeCodes(plain, topic);

  out.publish1 = await publishCode(o, topic, '21.5');
  await sleep(300);
  out.unclaim = await publishCode(o, 'access/unclaim', topic);
  out.publish2 = await publishCode(o, topic, '22.0');
  await sleep(300);
  out.readerGot = readerGot;
  out.plainGot = plainGot.filter(([t]) => t.startsWith('restricted/'));

  // refusals: a plain client using a SMOKER ID, a signature by the wrong key
  const impostor = mqtt.connect(url, { protocolVersion: 5, clientId: owner.id, reconnectPeriod: 0 });
  out.impostorConnack = (await connected(impostor)).code;
  impostor.end(true);
  const wrong = smokerClient({ ...reader, id: owner.id });
  out.wrongKeyConnack = (await connected(wrong)).code;
  wrong.end(true);

  await Promise.all([o.endAsync(), r.endAsync(), plain.endAsync()]);
  return out;
}

main().then(
  (out) => { process.stdout.write(`${JSON.stringify({ ok: true, ...out })}\n`); process.exit(0); },
  (err) => { process.stdout.write(`${JSON.stringify({ ok: false, error: String(err && err.stack || err) })}\n`); process.exit(1); },
);
