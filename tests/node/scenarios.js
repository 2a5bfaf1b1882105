// MQTT.js interop scenarios against a running broker.
// Usage: node scenarios.js HOST PORT PROTOCOL_VERSION(4|5) SCENARIO
// Prints one JSON object on stdout: {"ok": true, ...observations} or {"ok": false, "error": "..."}.
'use strict';
const mqtt = require('mqtt');

const [host, port, versionText, scenario] = process.argv.slice(2);
const protocolVersion = Number(versionText);
const url = process.env.MQTT_URL || `mqtt://${host}:${port}`;  // e.g. ws://host:port/mqtt
const uniq = `${process.pid}-${Date.now()}`;

function client(id, extra = {}) {
  return mqtt.connectAsync(url, { protocolVersion, clientId: `${id}-${uniq}`, reconnectPeriod: 0, ...extra });
}

function collect(c, n, timeoutMs = 5000) {
  return new Promise((resolve) => {
    const got = [];
    const timer = setTimeout(() => resolve(got.slice()), timeoutMs);
    c.on('message', (topic, payload, packet) => {
      got.push({ topic, payload: payload.toString(), qos: packet.qos, retain: packet.retain,
                 properties: packet.properties || {} });
      if (got.length === n) { clearTimeout(timer); resolve(got.slice()); }
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const scenarios = {
  async qos() {
    const sub = await client('sub');
    const pub = await client('pub');
    const t = `js/${uniq}/qos`;
    const granted = await sub.subscribeAsync(`${t}/+`, { qos: 2 });
    const wait = collect(sub, 3);
    for (const qos of [0, 1, 2]) await pub.publishAsync(`${t}/${qos}`, `m${qos}`, { qos });
    const got = await wait;
    await sub.endAsync(); await pub.endAsync();
    return { granted: granted.map((g) => g.qos), got: got.map((m) => [m.topic.split('/').pop(), m.payload, m.qos]) };
  },
  async retained() {
    const pub = await client('pub');
    const t = `js/${uniq}/ret`;
    await pub.publishAsync(t, 'kept', { qos: 1, retain: true });
    const sub = await client('sub');
    const wait = collect(sub, 1);
    await sub.subscribeAsync(t, { qos: 1 });
    const got = await wait;
    await pub.publishAsync(t, '', { qos: 1, retain: true });
    await sub.endAsync(); await pub.endAsync();
    return { got: got.map((m) => [m.payload, m.retain]) };
  },
  async will() {
    const t = `js/${uniq}/will`;
    const watcher = await client('watch');
    await watcher.subscribeAsync(t, { qos: 1 });
    const wait = collect(watcher, 1);
    const dying = await client('dying', { will: { topic: t, payload: Buffer.from('gone'), qos: 1, retain: false } });
    dying.stream.destroy();  // network loss, no DISCONNECT
    const got = await wait;
    await watcher.endAsync();
    return { got: got.map((m) => m.payload) };
  },
  async wildcards() {
    const sub = await client('sub');
    const pub = await client('pub');
    const t = `js/${uniq}/wild`;
    await sub.subscribeAsync([`${t}/+/temp`, `${t}/hall/#`], { qos: 0 });
    const wait = collect(sub, 3, 1500);
    for (const topic of [`${t}/kitchen/temp`, `${t}/hall/temp`, `${t}/hall/light/on`, `${t}/x/humidity`]) {
      await pub.publishAsync(topic, 'v', { qos: 0 });
    }
    const got = await wait;
    await sleep(300);
    await sub.endAsync(); await pub.endAsync();
    return { topics: got.map((m) => m.topic.slice(t.length + 1)).sort() };
  },
  async shared() {
    const a = await client('a');
    const b = await client('b');
    const pub = await client('pub');
    const t = `js/${uniq}/shared`;
    await a.subscribeAsync(`$share/g/${t}`, { qos: 1 });
    await b.subscribeAsync(`$share/g/${t}`, { qos: 1 });
    const wa = collect(a, 10, 1500);
    const wb = collect(b, 10, 1500);
    for (let i = 0; i < 10; i++) await pub.publishAsync(t, `${i}`, { qos: 1 });
    const [ga, gb] = await Promise.all([wa, wb]);
    await a.endAsync(); await b.endAsync(); await pub.endAsync();
    return { a: ga.length, b: gb.length, all: [...ga, ...gb].map((m) => Number(m.payload)).sort((x, y) => x - y) };
  },
  async subids() {
    const sub = await client('sub');
    const pub = await client('pub');
    const t = `js/${uniq}/subid`;
    await sub.subscribeAsync(`${t}/#`, { qos: 1, properties: { subscriptionIdentifier: 42 } });
    const wait = collect(sub, 1);
    await pub.publishAsync(`${t}/x`, 'id', { qos: 1 });
    const got = await wait;
    await sub.endAsync(); await pub.endAsync();
    return { ids: got.map((m) => m.properties.subscriptionIdentifier) };
  },
  async aliases() {
    // Outbound: the subscriber accepts aliases; inbound: the publisher uses them.
    const sub = await client('sub', { properties: { topicAliasMaximum: 5 } });
    const pub = await client('pub', { autoUseTopicAlias: true });
    const t = `js/${uniq}/alias`;
    await sub.subscribeAsync(t, { qos: 0 });
    const wait = collect(sub, 3);
    for (let i = 0; i < 3; i++) await pub.publishAsync(t, `${i}`, { qos: 1 });
    const got = await wait;
    await sub.endAsync(); await pub.endAsync();
    return { got: got.map((m) => [m.topic, m.payload]) };
  },
  async expiry() {
    const pub = await client('pub');
    const t = `js/${uniq}/exp`;
    await pub.publishAsync(`${t}/long`, 'long', { qos: 1, retain: true, properties: { messageExpiryInterval: 60 } });
    await pub.publishAsync(`${t}/short`, 'short', { qos: 1, retain: true, properties: { messageExpiryInterval: 1 } });
    await sleep(1600);
    const sub = await client('sub');
    const wait = collect(sub, 2, 1500);
    await sub.subscribeAsync(`${t}/#`, { qos: 1 });
    const got = await wait;
    await sub.endAsync(); await pub.endAsync();
    return { got: got.map((m) => [m.payload, m.properties.messageExpiryInterval]) };
  },
  async flow() {
    // The client announces Receive Maximum 2; the broker never has more than 2 unacknowledged.
    const sub = await client('sub', { properties: { receiveMaximum: 2 } });
    const pub = await client('pub');
    const t = `js/${uniq}/flow`;
    await sub.subscribeAsync(t, { qos: 1 });
    const wait = collect(sub, 20, 8000);
    for (let i = 0; i < 20; i++) pub.publish(t, `${i}`, { qos: 1 });
    const got = await wait;
    await sub.endAsync(); await pub.endAsync();
    return { count: got.length, inOrder: got.every((m, i) => m.payload === `${i}`) };
  },
};

(async () => {
  try {
    const result = await scenarios[scenario]();
    process.stdout.write(JSON.stringify({ ok: true, ...result }) + '\n');
    process.exit(0);
  } catch (err) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(err && err.stack || err) }) + '\n');
    process.exit(1);
  }
})();
