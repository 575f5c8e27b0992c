<?php
// The fixed client scenario through php-memcached (libmemcached) with OPT_BINARY_PROTOCOL: memcached's
// binary protocol. Usage:
//
//   php binary_scenario.php host:port                  the whole scenario
//   php binary_scenario.php host:port USER PASSWORD    against a server started with SASL (-S):
//                                                      setSaslAuthData with the right password, then a wrong one
//
// Every operation prints one line "<op> -> <result> [<result code> <message>]"
// so that the Go test can diff the run against memcached with the run against
// leasecached. Only CAS values differ legitimately; they print as "cas=<n>".

// Longest value shown verbatim; longer ones as length + digest.
const SHOW_MAX = 64;
// A large value that fits memcached's default 1 MiB item limit, and one that does not.
const LARGE = 500 * 1024;
const TOO_LARGE = 2 * 1024 * 1024;
// See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
const TTL = 2;
const TTL_WAIT_US = 3100000;
// Socket timeouts in milliseconds: loopback, generous.
const TIMEOUT_MS = 5000;
// Stats whose values are deterministic for a fixed scenario on a fresh server.
// get_expired is not one: whether a get finds an expired item or a background
// reaper took it first is a matter of timing, on memcached as on leasecached.
// Nor is total_items: memcached itself varies by one between runs of the same
// scenario (an incr copies the item when another thread holds a reference to it).
const STABLE_STATS = ['cmd_get', 'cmd_set', 'cmd_flush', 'cmd_touch', 'get_hits', 'get_misses',
    'get_flushed', 'delete_hits', 'delete_misses', 'incr_hits', 'incr_misses',
    'decr_hits', 'decr_misses', 'cas_hits', 'cas_misses', 'cas_badval', 'touch_hits', 'touch_misses',
    'curr_items', 'threads', 'evictions', 'version', 'pointer_size', 'limit_maxbytes'];

function show($v): string {
    if (is_array($v)) {
        ksort($v);
        $parts = [];
        foreach ($v as $k => $x) {
            $parts[] = "$k: " . show($x);
        }
        return '[' . implode(', ', $parts) . ']';
    }
    if (is_string($v) && strlen($v) > SHOW_MAX) {
        return sprintf('string len=%d sha1=%s', strlen($v), substr(sha1($v), 0, 16));
    }
    if (is_string($v)) {
        return '"' . preg_replace_callback('/[^\x20-\x7e]/', fn($b) => sprintf('\\x%02x', ord($b[0])), $v) . '"';
    }
    return var_export($v, true);
}

// libmemcached's messages name its memcached_st by address ("(0x55d0c8a0c280) AUTHENTICATION FAILURE").
function clean(string $msg): string {
    return preg_replace('/\(0x[0-9a-f]+\) /', '', $msg);
}

function op(Memcached $m, string $name, callable $fn) {
    try {
        $r = $fn();
    } catch (Throwable $e) {
        echo "$name -> throw " . get_class($e) . ': ' . $e->getMessage() . "\n";
        return null;
    }
    echo "$name -> " . show($r) . ' [' . $m->getResultCode() . ' ' . clean($m->getResultMessage()) . "]\n";
    return $r;
}

// refused runs an operation a server must refuse (no credentials): it answers "Auth failure" and closes.
// libmemcached reports a get refused so as NOT FOUND, or as CONNECTION FAILURE when the close overtakes the
// answer (a reset), against memcached as against leasecached, as timing has it: both print as one outcome.
// A value would mean the get was served.
function refused(Memcached $m, string $name, callable $fn) {
    $r = $fn();
    $code = $m->getResultCode();
    $how = $code . ' ' . clean($m->getResultMessage());
    if ($r === false && in_array($code, [Memcached::RES_NOTFOUND, Memcached::RES_CONNECTION_FAILURE], true)) {
        $how = 'refused';
    }
    echo "$name -> " . show($r) . " [$how]\n";
}

function client(string $host, int $port, array $extra = []): Memcached {
    $m = new Memcached();
    $m->setOptions([
        // Binary protocol (SASL needs it).
        Memcached::OPT_BINARY_PROTOCOL => true,
        // Values go to the server as given, so append/prepend and sizes mean what they say.
        Memcached::OPT_COMPRESSION => false,
        Memcached::OPT_CONNECT_TIMEOUT => TIMEOUT_MS,
        Memcached::OPT_SEND_TIMEOUT => TIMEOUT_MS * 1000,
        Memcached::OPT_RECV_TIMEOUT => TIMEOUT_MS * 1000,
        Memcached::OPT_POLL_TIMEOUT => TIMEOUT_MS,
    ] + $extra);
    $m->addServer($host, $port);
    return $m;
}

function binary_value(): string {
    $up = '';
    for ($i = 0; $i < 256; $i++) {
        $up .= chr($i);
    }
    return $up . "\r\nEND\r\n" . strrev($up);
}

function large_value(int $n): string {
    $out = '';
    for ($i = 0; strlen($out) < $n; $i++) {
        $out .= hash('sha256', (string)$i, true);
    }
    return substr($out, 0, $n);
}

function scenario(string $host, int $port): void {
    $c = client($host, $port);
    $nr = client($host, $port, [Memcached::OPT_NOREPLY => true]);

    op($c, 'getVersion', fn() => array_values($c->getVersion()));
    op($c, 'flush', fn() => $c->flush());
    op($c, 'set a', fn() => $c->set('a', 'alpha'));
    op($c, 'set i (int)', fn() => $c->set('i', 42));
    op($c, 'set arr (serialized)', fn() => $c->set('arr', ['x' => [1, 2]]));
    op($c, 'get a', fn() => $c->get('a'));
    op($c, 'get i', fn() => $c->get('i'));
    op($c, 'get arr', fn() => $c->get('arr'));
    op($c, 'get missing', fn() => $c->get('missing'));
    op($c, 'getMulti a i missing', fn() => $c->getMulti(['a', 'i', 'missing']));
    op($c, 'getMulti none present', fn() => $c->getMulti(['missing1', 'missing2']));
    op($c, 'setMulti', fn() => $c->setMulti(['m1' => 'one', 'm2' => 'two']));
    op($c, 'getMulti preserve order', fn() => array_keys($c->getMulti(['m2', 'missing', 'm1'], Memcached::GET_PRESERVE_ORDER)));
    op($c, 'setMulti 40 keys', fn() => $c->setMulti(array_combine(array_map(fn($i) => "k$i", range(0, 39)), array_map(fn($i) => "v$i", range(0, 39)))));
    op($c, 'getMulti 45 keys', fn() => count($c->getMulti(array_map(fn($i) => "k$i", range(0, 44)))));
    op($c, 'setMulti 500, getMulti 600', function () use ($c) {
        $items = [];
        for ($i = 0; $i < 500; $i++) {
            $items["bulk$i"] = str_repeat("v$i", $i % 50);
        }
        $c->setMulti($items);
        $got = $c->getMulti(array_map(fn($i) => "bulk$i", range(0, 599)));
        ksort($got);
        return [count($got), substr(sha1(serialize($got)), 0, 16)];
    });
    op($c, 'getDelayed + fetchAll', function () use ($c) {
        $c->getDelayed(['bulk1', 'bulk2', 'missing', 'bulk499'], true);
        $all = $c->fetchAll();
        usort($all, fn($x, $y) => strcmp($x['key'], $y['key']));
        return array_map(fn($e) => [$e['key'], $e['value'], $e['cas'] > 0], $all);
    });
    op($c, 'add a (exists)', fn() => $c->add('a', 'x'));
    op($c, 'add c', fn() => $c->add('c', 'gamma'));
    op($c, 'replace a', fn() => $c->replace('a', 'alpha2'));
    op($c, 'replace missing', fn() => $c->replace('missing', 'x'));
    op($c, 'append a', fn() => $c->append('a', '+app'));
    op($c, 'prepend a', fn() => $c->prepend('a', 'pre+'));
    op($c, 'get a after append/prepend', fn() => $c->get('a'));
    op($c, 'append missing', fn() => $c->append('missing', 'x'));
    op($c, 'prepend missing', fn() => $c->prepend('missing', 'x'));

    $g = $c->get('a', null, Memcached::GET_EXTENDED);
    echo 'get extended a -> ' . ($g ? "value={$g['value']} cas={$g['cas']} flags={$g['flags']}" : 'false') . "\n";
    $cas = $g ? $g['cas'] : 0;
    op($c, 'cas a (current)', fn() => $c->cas($cas, 'a', 'swapped'));
    op($c, 'cas a (stale)', fn() => $c->cas($cas, 'a', 'again'));
    op($c, 'get a after cas', fn() => $c->get('a'));
    op($c, 'cas missing', fn() => $c->cas($cas, 'missing', 'x'));
    op($c, 'getMulti extended has cas', fn() => array_map(fn($e) => isset($e['cas']) && $e['cas'] > 0, $c->getMulti(['a', 'c'], Memcached::GET_EXTENDED)));

    op($c, 'delete a', fn() => $c->delete('a'));
    op($c, 'delete a again', fn() => $c->delete('a'));
    op($c, 'deleteMulti m1 m2 missing', fn() => $c->deleteMulti(['m1', 'm2', 'missing']));

    op($c, 'set n 10', fn() => $c->set('n', '10'));
    op($c, 'increment n 5', fn() => $c->increment('n', 5));
    op($c, 'decrement n 3', fn() => $c->decrement('n', 3));
    op($c, 'decrement n 100 (floors at 0)', fn() => $c->decrement('n', 100));
    op($c, 'increment n (default 1)', fn() => $c->increment('n'));
    op($c, 'get n', fn() => $c->get('n'));
    op($c, 'set big 2^64-1', fn() => $c->set('big', '18446744073709551615'));
    op($c, 'increment big 1 (wraps)', fn() => $c->increment('big', 1));
    op($c, 'increment missing', fn() => $c->increment('missing', 1));
    op($c, 'decrement missing', fn() => $c->decrement('missing', 1));
    op($c, 'increment missing with initial 7', fn() => $c->increment('ctr', 1, 7, 100));
    op($c, 'increment ctr again', fn() => $c->increment('ctr', 1, 7, 100));
    op($c, 'decrement missing with initial 3', fn() => $c->decrement('dctr', 1, 3, 100));
    op($c, 'get ctr', fn() => $c->get('ctr'));
    op($c, 'increment c (non-numeric)', fn() => $c->increment('c', 1));
    op($c, 'get c after failed increment', fn() => $c->get('c'));
    op($c, 'increment i (int flag)', fn() => $c->increment('i', 1));
    op($c, 'get i after increment', fn() => $c->get('i'));
    op($c, 'incrementByKey', fn() => $c->incrementByKey('grp', 'ctr', 10));

    op($c, 'touch c', fn() => $c->touch('c', 100));
    op($c, 'touch missing', fn() => $c->touch('missing', 100));

    $big = large_value(LARGE);
    op($c, 'set large 500KB', fn() => $c->set('large', $big));
    op($c, 'get large', fn() => $c->get('large'));
    op($c, 'get large equal', fn() => $c->get('large') === $big);
    op($c, 'set toolarge 2MB', fn() => $c->set('toolarge', large_value(TOO_LARGE)));
    op($c, 'get toolarge', fn() => $c->get('toolarge'));
    op($c, 'get c after too large', fn() => $c->get('c'));

    $bin = binary_value();
    op($c, 'set bin', fn() => $c->set('bin', $bin));
    op($c, 'get bin equal', fn() => $c->get('bin') === $bin);
    op($c, 'set empty', fn() => $c->set('empty', ''));
    op($c, 'get empty', fn() => $c->get('empty'));

    op($c, 'set unicode key', fn() => $c->set('ключ-ü', 'значение'));
    op($c, 'get unicode key', fn() => $c->get('ключ-ü'));
    op($c, 'set key with space (binary allows it; libmemcached refuses OPT_VERIFY_KEY with it)', fn() => $c->set('has space', 'x'));
    op($c, 'get key with space', fn() => $c->get('has space'));
    op($c, 'set key 250 chars', fn() => $c->set(str_repeat('k', 250), 'x'));
    op($c, 'get key 250 chars', fn() => $c->get(str_repeat('k', 250)));
    op($c, 'set key 251 chars', fn() => $c->set(str_repeat('k', 251), 'x'));
    op($c, 'get key 251 chars', fn() => $c->get(str_repeat('k', 251)));
    op($c, 'get c after bad keys', fn() => $c->get('c'));

    // Only quiet commands that succeed: a failing one is still answered (ADDQ on an existing key, DELETEQ
    // on a missing one), and whether libmemcached, which expects no reply, has read that stray reply
    // before the next command's is a matter of timing.
    op($nr, 'set noreply (SETQ)', fn() => $nr->set('nr', 'quiet'));
    op($nr, 'set noreply 2 (SETQ)', fn() => $nr->set('nr2', 'gone soon'));
    op($nr, 'delete noreply (DELETEQ)', fn() => $nr->delete('nr2'));
    op($nr, 'increment noreply (INCREMENTQ)', fn() => $nr->increment('n', 1));
    op($nr, 'get nr (same connection: the quiet commands were read first)', fn() => $nr->get('nr'));
    op($c, 'get n after quiet increment', fn() => $c->get('n'));
    op($c, 'get nr2 after quiet delete', fn() => $c->get('nr2'));

    // Over 30 days an expiry is an absolute Unix time: one in the future, one in the past.
    op($c, 'set absolute expiry in 100 s', fn() => $c->set('abs', 'x', time() + 100));
    op($c, 'get absolute expiry in 100 s', fn() => $c->get('abs'));
    op($c, 'set absolute expiry 100 s ago', fn() => $c->set('past', 'x', time() - 100));
    op($c, 'get absolute expiry 100 s ago', fn() => $c->get('past'));
    op($c, 'set ttl ' . TTL, fn() => $c->set('ttl', 'short', TTL));
    op($c, 'get ttl now', fn() => $c->get('ttl'));
    op($c, 'set negative expire', fn() => $c->set('neg', 'gone', -1));
    op($c, 'get negative expire', fn() => $c->get('neg'));
    usleep(TTL_WAIT_US);
    op($c, 'get ttl after expiry', fn() => $c->get('ttl'));

    $st = $c->getStats();
    $s = $st ? array_values($st)[0] : [];
    $keys = array_keys($s);
    sort($keys);
    // One line per stat name, so that a diff names each missing or extra stat.
    foreach ($keys as $k) {
        echo "stats has $k\n";
    }
    foreach (STABLE_STATS as $k) {
        echo "stats $k -> " . (isset($s[$k]) ? var_export($s[$k], true) : 'unset') . "\n";
    }
    op($c, 'getStats items', fn() => ($x = $c->getStats('items')) ? count(array_values($x)[0]) > 0 : $x);
    op($c, 'getStats settings maxbytes', fn() => ($x = $c->getStats('settings')) ? (array_values($x)[0]['maxbytes'] ?? 'unset') : $x);
    op($c, 'getAllKeys', function () use ($c) {
        $k = $c->getAllKeys();
        return is_array($k) ? ['array', count($k) > 0] : $k;
    });
    op($c, 'flush', fn() => $c->flush());
    op($c, 'get c after flush', fn() => $c->get('c'));
    op($c, 'flush delay 0', fn() => $c->flush(0));
    op($c, 'getVersion', fn() => array_values($c->getVersion()));
    $c->quit();
}

// Against a SASL server: the right password works for every kind of operation; a wrong one fails.
function sasl_scenario(string $host, int $port, string $user, string $password): void {
    $c = client($host, $port);
    $c->setSaslAuthData($user, $password);
    op($c, 'auth: set', fn() => $c->set('s', 'secret value'));
    op($c, 'auth: get', fn() => $c->get('s'));
    op($c, 'auth: getMulti', fn() => $c->getMulti(['s', 'missing']));
    op($c, 'auth: increment with initial', fn() => $c->increment('ctr', 1, 5));
    op($c, 'auth: delete', fn() => $c->delete('s'));
    op($c, 'auth: getVersion', fn() => array_values($c->getVersion()));
    op($c, 'auth: getStats curr_items', fn() => ($x = $c->getStats()) ? array_values($x)[0]['curr_items'] : $x);
    op($c, 'auth: set s for the refused gets', fn() => $c->set('s', 'kept secret'));
    $c->quit();

    $bad = client($host, $port);
    $bad->setSaslAuthData($user, $password . '-wrong');
    op($bad, 'wrong password: get', fn() => $bad->get('s'));
    op($bad, 'wrong password: set', fn() => $bad->set('s', 'x'));
    $bad->quit();

    $none = client($host, $port);
    refused($none, 'no credentials: get', fn() => $none->get('s'));
    op($none, 'no credentials: set', fn() => $none->set('s', 'x'));
    $none->quit();
}

[$host, $port] = explode(':', $argv[1]);
if (count($argv) === 4) {
    sasl_scenario($host, (int)$port, $argv[2], $argv[3]);
} else {
    scenario($host, (int)$port);
}
