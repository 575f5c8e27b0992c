<?php
// PHP sessions in memcached through php-memcached's session handler, which speaks the binary protocol
// (memcached.sess_binary_protocol, on by default) and locks a session with an ADD of a lock key. Usage:
//
//   php session_scenario.php host:port                  the scenario
//   php session_scenario.php host:port USER PASSWORD    the same against a server started with SASL (-S),
//                                                       with memcached.sess_sasl_username/password
//
// Every step prints one line "<step> -> <result>" so that the Go test can diff the run against memcached
// with the run against leasecached.

// The session handler's lock: a few short retries, so that a held lock fails session_start quickly.
const LOCK_RETRIES = 2;
const LOCK_WAIT_MS = 50;
const PREFIX = 'memc.sess.key.';

ob_start(); // session_start and session_regenerate_id refuse to run once output has started
[$host, $port] = explode(':', $argv[1]);
$sasl = count($argv) === 4;
foreach ([
    'session.save_handler' => 'memcached',
    'session.save_path' => "$host:$port",
    'session.use_cookies' => '0',
    'session.use_only_cookies' => '0',
    'session.use_strict_mode' => '0',
    'session.cache_limiter' => '',
    'session.serialize_handler' => 'php',
    'session.gc_maxlifetime' => '100',
    'memcached.sess_binary_protocol' => '1',
    'memcached.sess_locking' => '1',
    'memcached.sess_lock_retries' => (string)LOCK_RETRIES,
    'memcached.sess_lock_wait_min' => (string)LOCK_WAIT_MS,
    'memcached.sess_lock_wait_max' => (string)LOCK_WAIT_MS,
    'memcached.sess_prefix' => PREFIX,
] + ($sasl ? ['memcached.sess_sasl_username' => $argv[2], 'memcached.sess_sasl_password' => $argv[3]] : []) as $k => $v) {
    if (ini_set($k, $v) === false) {
        echo "ini_set $k failed\n";
    }
}

// $m looks at what the session handler stored, over the binary protocol too.
$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);
$m->setOption(Memcached::OPT_COMPRESSION, false);
if ($sasl) {
    $m->setSaslAuthData($argv[2], $argv[3]);
}
$m->addServer($host, (int)$port);

function show($x): string {
    return str_replace("\n", ' ', var_export($x, true));
}

function step(string $name, callable $fn): void {
    $r = $fn();
    echo "$name -> " . show($r) . "\n";
}

step('flush', fn() => $m->flush());
session_id('sessabc');
step('session_start (new)', fn() => session_start());
step('$_SESSION', fn() => $_SESSION);
step('lock key while open', fn() => $m->get(PREFIX . 'lock.sessabc'));
$_SESSION['n'] = 1;
$_SESSION['s'] = str_repeat('x', 20);
step('session_write_close', fn() => session_write_close());
step('lock key after close', fn() => $m->get(PREFIX . 'lock.sessabc'));
step('stored data', fn() => $m->get(PREFIX . 'sessabc'));

session_id('sessabc');
step('session_start (existing)', fn() => session_start());
step('$_SESSION', fn() => $_SESSION);
$_SESSION['n']++;
step('session_regenerate_id (keep old)', fn() => session_regenerate_id(false));
$new = session_id();
step('new id differs', fn() => $new !== 'sessabc');
step('session_write_close', fn() => session_write_close());
step('old id still stored', fn() => $m->get(PREFIX . 'sessabc'));
step('new id stored', fn() => $m->get(PREFIX . $new));

session_id($new);
step('session_start (new id)', fn() => session_start());
step('$_SESSION', fn() => $_SESSION);
step('session_destroy', fn() => session_destroy());
step('new id after destroy', fn() => $m->get(PREFIX . $new));

// Another process holds the lock: session_start gives up after its retries.
step('hold the lock of sesslocked', fn() => $m->add(PREFIX . 'lock.sesslocked', '1', 100));
session_id('sesslocked');
step('session_start (locked)', fn() => @session_start());
step('session_status', fn() => session_status() === PHP_SESSION_ACTIVE ? 'active' : 'none');
step('release the lock', fn() => $m->delete(PREFIX . 'lock.sesslocked'));
session_id('sesslocked');
step('session_start (unlocked)', fn() => session_start());
$_SESSION['ok'] = true;
step('session_write_close', fn() => session_write_close());
step('sesslocked stored', fn() => $m->get(PREFIX . 'sesslocked'));

// A session's lifetime is session.gc_maxlifetime: the item's expiry (touch on an unchanged write).
session_id('sesslocked');
step('session_start (read only)', fn() => session_start(['read_and_close' => true]));
step('$_SESSION', fn() => $_SESSION);
ob_end_flush();
