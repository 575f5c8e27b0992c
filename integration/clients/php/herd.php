<?php
// One plain get/set reader of one hot key through php-memcached (see ../README.md, "Herd").
//
// Usage: php herd.php HOST:PORT SECONDS
//
// It loops: get the key; on a miss, "query the database" (100 ms), then set the key with a 2 s TTL.
// Every refill prints "refill <unix ms>"; the Go test runs several of these processes and groups the
// refills into one episode per expiry. Nothing here knows about grace or hold: the client is unchanged.

const KEY = 'herd:hot';
const REFILL_US = 100000;
const TTL = 2;

[$host, $port] = explode(':', $argv[1]);
$until = microtime(true) + (float)$argv[2];
$m = new Memcached();
$m->setOptions([
    Memcached::OPT_BINARY_PROTOCOL => false,
    Memcached::OPT_CONNECT_TIMEOUT => 5000,
    Memcached::OPT_RECV_TIMEOUT => 10000000,
    Memcached::OPT_SEND_TIMEOUT => 10000000,
    Memcached::OPT_POLL_TIMEOUT => 10000,
]);
$m->addServer($host, (int)$port);
while (microtime(true) < $until) {
    if ($m->get(KEY) === false) {
        $t = (int)(microtime(true) * 1000);
        usleep(REFILL_US);
        $m->set(KEY, 'fresh', TTL);
        echo "refill $t\n";
    }
    usleep(random_int(5000, 15000));
}
echo "done\n";
