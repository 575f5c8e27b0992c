#!/usr/bin/env node
// The fixed client scenario through npm `memjs`, which speaks only memcached's binary protocol. Usage:
//
//   node memjs_scenario.js host:port                  the whole scenario
//   node memjs_scenario.js host:port USER PASSWORD    against a server started with SASL (-S): the
//                                                     right password, then a wrong one
//
// Every operation prints one line "<op> -> <result>" so that the Go test can diff the run against
// memcached with the run against leasecached. memjs shows no CAS values. The server's address shows in
// some results (stats are keyed by it); the Go test replaces it.
'use strict';

const crypto = require('crypto');
const memjs = require('memjs');

// Longest value shown verbatim; longer ones as length + digest.
const SHOW_MAX = 64;
// A large value that fits memcached's default 1 MiB item limit, and one that does not.
const LARGE = 500 * 1024;
const TOO_LARGE = 2 * 1024 * 1024;
// See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
const TTL = 2;
const TTL_WAIT_MS = 3100;
// memjs's per-operation timeout, in seconds: loopback, generous.
const TIMEOUT_S = 5;
// How long one operation may take before we print "timeout" and go on, so that a hang does not hide the rest.
const OP_TIMEOUT_MS = 8000;
// Stats whose values are deterministic for a fixed scenario on a fresh server (see ../python/common.py).
const STABLE_STATS = ['cmd_get', 'cmd_set', 'cmd_flush', 'cmd_touch', 'get_hits', 'get_misses',
  'get_flushed', 'delete_hits', 'delete_misses', 'incr_hits', 'incr_misses',
  'decr_hits', 'decr_misses', 'cas_hits', 'cas_misses', 'cas_badval', 'touch_hits', 'touch_misses',
  'curr_items', 'threads', 'evictions', 'version', 'pointer_size', 'limit_maxbytes'];

function sha1(b) {
  return crypto.createHash('sha1').update(b).digest('hex').slice(0, 16);
}

function show(v) {
  if (v === undefined) return 'undefined';
  if (Buffer.isBuffer(v)) {
    if (v.length > SHOW_MAX) return `Buffer len=${v.length} sha1=${sha1(v)}`;
    return `Buffer<${v.toString('hex')}>`;
  }
  if (Array.isArray(v)) return '[' + v.map(show).join(', ') + ']';
  if (v instanceof Error) return `Error: ${v.message}`;
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => `${k}: ${show(v[k])}`).join(', ') + '}';
  }
  return JSON.stringify(v);
}

// op awaits one promise-returning client call and prints its result or error.
async function op(name, fn) {
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ timeout: true }), OP_TIMEOUT_MS);
  });
  let line;
  try {
    const r = await Promise.race([fn().then((v) => ({ v })), timeout]);
    line = r.timeout ? 'timeout' : show(r.v);
  } catch (e) {
    line = 'error ' + show(e instanceof Error ? e : new Error(String(e)));
  }
  clearTimeout(timer);
  console.log(`${name} -> ${line}`);
}

// stats calls back once per server; one server here.
function stats(c, key) {
  return new Promise((resolve, reject) => {
    c.statsWithKey(key, (err, server, s) => (err ? reject(err) : resolve(s)));
  });
}

function binaryValue() {
  const up = Buffer.from([...Array(256).keys()]);
  return Buffer.concat([up, Buffer.from('\r\nEND\r\n'), Buffer.from(up).reverse()]);
}

function largeValue(n) {
  const parts = [];
  let len = 0;
  for (let i = 0; len < n; i++) {
    const d = crypto.createHash('sha256').update(String(i)).digest();
    parts.push(d);
    len += d.length;
  }
  return Buffer.concat(parts).subarray(0, n);
}

function client(addr, extra) {
  // No retries: an error reply shows as it is, once. The logger is silenced: memjs logs every error
  // reply to the console, and the results already show them.
  return memjs.Client.create(addr, Object.assign({
    retries: 0, timeout: TIMEOUT_S, conntimeout: TIMEOUT_S, logger: { log() {} },
  }, extra || {}));
}

async function scenario(addr) {
  const c = client(addr);
  await op('flush', () => c.flush());
  await op('set a', () => c.set('a', 'alpha'));
  await op('get a', () => c.get('a'));
  await op('get missing', () => c.get('missing'));
  await op('set f (expires)', () => c.set('f', Buffer.from('flagless'), { expires: 100 }));
  await op('get f', () => c.get('f'));
  await op('add a (exists)', () => c.add('a', 'x'));
  await op('add c', () => c.add('c', 'gamma'));
  await op('replace a', () => c.replace('a', 'alpha2'));
  await op('replace missing', () => c.replace('missing', 'x'));
  await op('append a', () => c.append('a', '+app'));
  await op('prepend a', () => c.prepend('a', 'pre+'));
  await op('get a after append/prepend', () => c.get('a'));
  await op('append missing', () => c.append('missing', 'x'));
  await op('prepend missing', () => c.prepend('missing', 'x'));
  await op('delete a', () => c.delete('a'));
  await op('delete a again', () => c.delete('a'));

  await op('set n 10', () => c.set('n', '10'));
  await op('increment n 5', () => c.increment('n', 5));
  await op('decrement n 3', () => c.decrement('n', 3, {}));
  await op('decrement n 100 (floors at 0)', () => c.decrement('n', 100, {}));
  await op('get n', () => c.get('n'));
  await op('increment missing (initial 0)', () => c.increment('ctr', 1));
  await op('increment missing with initial 7', () => c.increment('ctr7', 1, { initial: 7 }));
  await op('increment ctr7 again', () => c.increment('ctr7', 1, { initial: 7 }));
  await op('decrement missing with initial 3', () => c.decrement('dctr', 1, { initial: 3 }));
  await op('get ctr7', () => c.get('ctr7'));
  await op('increment c (non-numeric)', () => c.increment('c', 1));
  await op('get c after failed increment', () => c.get('c'));

  await op('touch c', () => c.touch('c', 100));
  await op('touch missing', () => c.touch('missing', 100));

  const big = largeValue(LARGE);
  await op('set large 500KB', () => c.set('large', big));
  await op('get large', () => c.get('large'));
  await op('get large equal', async () => (await c.get('large')).value.equals(big));
  await op('set toolarge 2MB', () => c.set('toolarge', largeValue(TOO_LARGE)));
  await op('get toolarge', () => c.get('toolarge'));
  await op('get c after too large', () => c.get('c'));

  const bin = binaryValue();
  await op('set bin', () => c.set('bin', bin));
  await op('get bin equal', async () => (await c.get('bin')).value.equals(bin));
  await op('set empty', () => c.set('empty', ''));
  await op('get empty', () => c.get('empty'));
  await op('set unicode key', () => c.set('ключ-ü', 'значение'));
  await op('get unicode key', () => c.get('ключ-ü'));
  await op('set key with space', () => c.set('has space', 'x'));
  await op('get key with space', () => c.get('has space'));
  await op('set key 250 chars', () => c.set('k'.repeat(250), 'x'));
  await op('get key 250 chars', () => c.get('k'.repeat(250)));
  // memcached answers a key over 250 bytes with EINVAL and closes the connection, which memjs does not
  // notice (the next request on it waits forever): a client of its own.
  const k = client(addr);
  await op('set key 251 chars', () => k.set('k'.repeat(251), 'x'));
  k.close();
  await op('get c after bad keys', () => c.get('c'));

  await op(`set ttl ${TTL}`, () => c.set('ttl', 'short', { expires: TTL }));
  await op('get ttl now', () => c.get('ttl'));
  await op(`increment tctr with ttl ${TTL}`, () => c.increment('tctr', 1, { initial: 5, expires: TTL }));
  await new Promise((r) => setTimeout(r, TTL_WAIT_MS));
  await op('get ttl after expiry', () => c.get('ttl'));
  await op('get tctr after expiry', () => c.get('tctr'));

  const s = await stats(c, '').catch((e) => ({ error: e.message }));
  // One line per stat name, so that a diff names each missing or extra stat.
  for (const k of Object.keys(s).sort()) console.log(`stats has ${k}`);
  for (const k of STABLE_STATS) console.log(`stats ${k} -> ${show(s[k])}`);
  await op('stats items non-empty', async () => Object.keys(await stats(c, 'items')).length > 0);
  await op('stats settings maxbytes', async () => (await stats(c, 'settings')).maxbytes);
  await op('stats slabs non-empty', async () => Object.keys(await stats(c, 'slabs')).length > 0);
  await op('resetStats', () => new Promise((resolve, reject) => c.resetStats((err) => (err ? reject(err) : resolve(true)))));
  await op('stats after reset get_hits', async () => (await stats(c, '')).get_hits);
  await op('flush', () => c.flush());
  await op('get c after flush', () => c.get('c'));
  c.quit();
}

// Against a SASL server: the right password works for every kind of operation; a wrong one fails.
async function saslScenario(addr, user, password) {
  const c = client(addr, { username: user, password });
  await op('auth: set', () => c.set('s', 'secret value'));
  await op('auth: get', () => c.get('s'));
  await op('auth: increment with initial', () => c.increment('ctr', 1, { initial: 5 }));
  await op('auth: delete', () => c.delete('s'));
  await op('auth: stats curr_items', async () => (await stats(c, '')).curr_items);
  c.quit();

  const bad = client(addr, { username: user, password: password + '-wrong' });
  await op('wrong password: get', () => bad.get('s'));
  await op('wrong password: set', () => bad.set('s', 'x'));
  bad.close();

  const none = client(addr);
  await op('no credentials: get', () => none.get('s'));
  none.close();
}

const [addr, user, password] = process.argv.slice(2);
(user !== undefined ? saslScenario(addr, user, password) : scenario(addr)).then(
  () => process.exit(0),
  (e) => { console.log(`scenario failed: ${e.stack}`); process.exit(1); },
);
