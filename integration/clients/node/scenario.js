#!/usr/bin/env node
// The fixed client scenario through the npm `memcached` client (text protocol
// only). Usage: node scenario.js host:port
//
// Every operation prints one line "<op> -> <result>" so that the Go test can
// diff the run against memcached with the run against leasecached. Only CAS
// values differ legitimately; they print as "cas=<n>".
'use strict';

const crypto = require('crypto');
const Memcached = require('memcached');

// Longest value shown verbatim; longer ones as length + digest.
const SHOW_MAX = 64;
// A large value that fits memcached's default 1 MiB item limit, and one that does not.
const LARGE = 500 * 1024;
const TOO_LARGE = 2 * 1024 * 1024;
// See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
const TTL = 2;
const TTL_WAIT_MS = 3100;
// How long one operation may take before we print "timeout" and go on: the
// client never answers some error replies, and a hang must not hide the rest.
const OP_TIMEOUT_MS = 3000;
// The retry pause of the client that reaches the server's SERVER_ERROR replies.
const RAW_RETRY_MS = 100;
// Stats whose values are deterministic for a fixed scenario on a fresh server.
// get_expired is not one: whether a get finds an expired item or a background
// reaper took it first is a matter of timing, on memcached as on leasecached.
// Nor is total_items: memcached itself varies by one between runs of the same
// scenario (an incr copies the item when another thread holds a reference to it).
const STABLE_STATS = ['cmd_get', 'cmd_set', 'cmd_flush', 'cmd_touch', 'get_hits', 'get_misses',
  'get_flushed', 'delete_hits', 'delete_misses', 'incr_hits', 'incr_misses',
  'decr_hits', 'decr_misses', 'cas_hits', 'cas_misses', 'cas_badval', 'touch_hits', 'touch_misses',
  'curr_items', 'threads', 'evictions', 'version', 'pointer_size', 'limit_maxbytes'];

function show(v) {
  if (v === undefined) return 'undefined';
  if (Buffer.isBuffer(v)) {
    if (v.length > SHOW_MAX) return `Buffer len=${v.length} sha1=${sha1(v)}`;
    return `Buffer<${v.toString('hex')}>`;
  }
  if (typeof v === 'string' && v.length > SHOW_MAX) return `string len=${v.length} sha1=${sha1(Buffer.from(v, 'utf8'))}`;
  if (Array.isArray(v)) return '[' + v.map(show).join(', ') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => `${k}: ${show(v[k])}`).join(', ') + '}';
  }
  return JSON.stringify(v);
}

function sha1(b) {
  return crypto.createHash('sha1').update(b).digest('hex').slice(0, 16);
}

// call runs one callback-style client method and resolves with [err, result].
function call(fn) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve([new Error('timeout (no callback)'), undefined]), OP_TIMEOUT_MS);
    try {
      fn((err, res) => {
        clearTimeout(timer);
        resolve([err, res]);
      });
    } catch (e) {
      clearTimeout(timer);
      resolve([e, undefined]);
    }
  });
}

async function op(name, fn, view = (r) => r) {
  const [err, res] = await call(fn);
  if (err) {
    const msg = Array.isArray(err) ? err.map((e) => e.message || String(e)).join('; ') : (err.message || String(err));
    // The client names the server in some messages; the port is not the server's behaviour.
    console.log(`${name} -> error ${msg.split(process.argv[2]).join('<addr>')}`);
    return undefined;
  }
  console.log(`${name} -> ${show(view(res))}`);
  return res;
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const addr = process.argv[2];
  const opts = { retries: 0, failures: 0, timeout: 2000, poolSize: 1, idle: 1000, reconnect: 100, retry: 100, remove: false };
  const c = new Memcached(addr, opts);
  // raw skips the client-side limits so the server's own refusals are reached.
  // The client takes a SERVER_ERROR reply for a connection issue; with
  // failures left it retries after `retry` ms instead of marking the server
  // dead and probing it with ping(8).
  const rawOpts = { ...opts, maxValue: 4 * TOO_LARGE, keyCompression: false, failures: 3, retry: RAW_RETRY_MS };
  const raw = new Memcached(addr, rawOpts);

  await op('version', (cb) => c.version(cb), (r) => r.map((v) => v.version));
  await op('flush', (cb) => c.flush(cb));
  await op('set a', (cb) => c.set('a', 'alpha', 0, cb));
  await op('set o (JSON object)', (cb) => c.set('o', { x: [1, 2] }, 0, cb));
  await op('set i (number)', (cb) => c.set('i', 42, 0, cb));
  await op('get a', (cb) => c.get('a', cb));
  await op('get o', (cb) => c.get('o', cb));
  await op('get i', (cb) => c.get('i', cb));
  await op('get missing', (cb) => c.get('missing', cb));
  await op('getMulti a o missing', (cb) => c.getMulti(['a', 'o', 'missing'], cb));
  await op('add a (exists)', (cb) => c.add('a', 'x', 0, cb));
  await op('add c', (cb) => c.add('c', 'gamma', 0, cb));
  await op('replace a', (cb) => c.replace('a', 'alpha2', 0, cb));
  await op('replace missing', (cb) => c.replace('missing', 'x', 0, cb));
  await op('append a', (cb) => c.append('a', '+app', cb));
  await op('prepend a', (cb) => c.prepend('a', 'pre+', cb));
  await op('get a after append/prepend', (cb) => c.get('a', cb));
  await op('append missing', (cb) => c.append('missing', 'x', cb));
  await op('prepend missing', (cb) => c.prepend('missing', 'x', cb));

  const [, g] = await call((cb) => c.gets('a', cb));
  const cas = g && g.cas;
  console.log(`gets a -> value=${show(g && g.a)} cas=${cas}`);
  await op('cas a (current)', (cb) => c.cas('a', 'swapped', cas, 0, cb));
  await op('cas a (stale)', (cb) => c.cas('a', 'again', cas, 0, cb));
  await op('get a after cas', (cb) => c.get('a', cb));
  await op('cas missing', (cb) => c.cas('missing', 'x', cas, 0, cb));

  await op('del a', (cb) => c.del('a', cb));
  await op('del a again', (cb) => c.del('a', cb));

  await op('set n 10', (cb) => c.set('n', '10', 0, cb));
  await op('incr n 5', (cb) => c.incr('n', 5, cb));
  await op('decr n 3', (cb) => c.decr('n', 3, cb));
  await op('decr n 100 (floors at 0)', (cb) => c.decr('n', 100, cb));
  await op('set big 2^64-1', (cb) => c.set('big', '18446744073709551615', 0, cb));
  await op('incr big 1 (wraps)', (cb) => c.incr('big', 1, cb));
  await op('incr missing', (cb) => c.incr('missing', 1, cb));
  await op('decr missing', (cb) => c.decr('missing', 1, cb));
  await op('incr c (non-numeric)', (cb) => c.incr('c', 1, cb));
  await op('get c after failed incr', (cb) => c.get('c', cb));

  await op('touch c', (cb) => c.touch('c', 100, cb));
  await op('touch missing', (cb) => c.touch('missing', 100, cb));

  const big = largeValue(LARGE);
  await op('set large 500KB', (cb) => c.set('large', big, 0, cb));
  await op('get large', (cb) => c.get('large', cb));
  await op('get large equal', (cb) => c.get('large', cb), (r) => Buffer.isBuffer(r) && r.equals(big));
  await op('set toolarge 2MB (client maxValue)', (cb) => c.set('toolarge', largeValue(TOO_LARGE), 0, cb));
  await op('set toolarge 2MB (unchecked)', (cb) => raw.set('toolarge', largeValue(TOO_LARGE), 0, cb));
  await op('get toolarge', (cb) => c.get('toolarge', cb));
  await sleep(2 * RAW_RETRY_MS);
  await op('get c after too large (same client)', (cb) => raw.get('c', cb));

  const bin = binaryValue();
  await op('set bin', (cb) => c.set('bin', bin, 0, cb));
  await op('get bin equal', (cb) => c.get('bin', cb), (r) => Buffer.isBuffer(r) && r.equals(bin));
  await op('set empty', (cb) => c.set('empty', '', 0, cb));
  await op('get empty', (cb) => c.get('empty', cb));
  await op('set utf-8 value', (cb) => c.set('u', 'значение ü', 0, cb));
  await op('get utf-8 value', (cb) => c.get('u', cb));

  await op('set unicode key', (cb) => c.set('ключ-ü', 'v', 0, cb));
  await op('get unicode key', (cb) => c.get('ключ-ü', cb));
  await op('set key with space', (cb) => c.set('has space', 'x', 0, cb));
  await op('set key 250 chars', (cb) => c.set('k'.repeat(250), 'x', 0, cb));
  await op('get key 250 chars', (cb) => c.get('k'.repeat(250), cb));
  await op('set key 251 chars (md5-compressed by the client)', (cb) => c.set('k'.repeat(251), 'y', 0, cb));
  await op('get key 251 chars (md5-compressed by the client)', (cb) => c.get('k'.repeat(251), cb));
  await op('set key 251 chars (unchecked)', (cb) => raw.set('k'.repeat(251), 'x', 0, cb));
  await op('get c after bad keys (same client)', (cb) => raw.get('c', cb));

  await op(`set ttl ${TTL}`, (cb) => c.set('ttl', 'short', TTL, cb));
  await op('get ttl now', (cb) => c.get('ttl', cb));
  await sleep(TTL_WAIT_MS);
  await op('get ttl after expiry', (cb) => c.get('ttl', cb));

  const [serr, st] = await call((cb) => c.stats(cb));
  const s = (!serr && st && st[0]) || {};
  // One line per stat name, so that a diff names each missing or extra stat.
  for (const k of Object.keys(s).filter((k) => k !== 'server').sort()) console.log(`stats has ${k}`);
  for (const k of STABLE_STATS) console.log(`stats ${k} -> ${show(s[k])}`);
  await op('settings has maxbytes', (cb) => c.settings(cb), (r) => r.map((x) => 'maxbytes' in x));
  await op('items has number', (cb) => c.items(cb), (r) => r.map((x) => Object.keys(x).filter((k) => k !== 'server').every((k) => 'number' in x[k])));
  await op('slabs has total_malloced', (cb) => c.slabs(cb), (r) => r.map((x) => 'total_malloced' in x));
  await op('cachedump slab 1', (cb) => c.cachedump(addr, 1, 0, cb), (r) => (r === undefined ? r : [].concat(r).map((x) => x.key).sort()));
  await op('flush', (cb) => c.flush(cb));
  await op('get c after flush', (cb) => c.get('c', cb));
  c.end();
  raw.end();
}

main().then(() => process.exit(0), (e) => {
  console.log(`fatal -> ${e && e.stack}`);
  process.exit(1);
});
