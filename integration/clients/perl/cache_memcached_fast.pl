#!/usr/bin/perl
# The fixed client scenario through Cache::Memcached::Fast (XS, text protocol).
# Usage: cache_memcached_fast.pl host:port
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Cache::Memcached::Fast;
use Scenario qw(op stats_lines binary_value large_value LARGE TOO_LARGE);

# See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
use constant TTL      => 2;
use constant TTL_WAIT => 3.1;
# Client-side value limit of the unchecked client: past the server's 1 MiB.
use constant UNCHECKED_MAX_SIZE => 4 * 1024 * 1024;

my $addr = shift or die "usage: $0 host:port\n";
my %common = (servers => [$addr], compress_threshold => -1, connect_timeout => 2, io_timeout => 5);
my $c  = Cache::Memcached::Fast->new({ %common });
my $u8 = Cache::Memcached::Fast->new({ %common, utf8 => 1 });
my $raw = Cache::Memcached::Fast->new({ %common, max_size => UNCHECKED_MAX_SIZE, check_args => 'skip', close_on_error => 0 });

op('server_versions', sub { [values %{ $c->server_versions }] });
op('flush_all', sub { [values %{ $c->flush_all }] });
op('set a', sub { $c->set('a', 'alpha') });
op('set r (ref, Storable)', sub { $c->set('r', { x => [1, 2] }) });
op('get a', sub { $c->get('a') });
op('get r', sub { $c->get('r')->{x} });
op('get missing', sub { $c->get('missing') });
op('get_multi a r missing', sub { my $h = $c->get_multi('a', 'r', 'missing'); [sort keys %$h] });
op('set_multi', sub { my @r = $c->set_multi(['m1', 'one'], ['m2', 'two']); \@r });
op('add a (exists)', sub { $c->add('a', 'x') });
op('add c', sub { $c->add('c', 'gamma') });
op('add_multi', sub { my @r = $c->add_multi(['c', 'x'], ['d', 'delta']); \@r });
op('replace a', sub { $c->replace('a', 'alpha2') });
op('replace missing', sub { $c->replace('missing', 'x') });
op('append a', sub { $c->append('a', '+app') });
op('prepend a', sub { $c->prepend('a', 'pre+') });
op('get a after append/prepend', sub { $c->get('a') });
op('append missing', sub { $c->append('missing', 'x') });
op('prepend missing', sub { $c->prepend('missing', 'x') });

my $g = $c->gets('a');
print 'gets a -> ' . ($g ? "cas=$g->[0] value=$g->[1]" : 'undef') . "\n";
op('cas a (current)', sub { $c->cas('a', $g->[0], 'swapped') });
op('cas a (stale)', sub { $c->cas('a', $g->[0], 'again') });
op('get a after cas', sub { $c->get('a') });
op('cas missing', sub { $c->cas('missing', $g->[0], 'x') });
op('gets_multi a missing', sub { my $h = $c->gets_multi('a', 'missing'); [map { "$_=" . $h->{$_}[1] } sort keys %$h] });

op('delete a', sub { $c->delete('a') });
op('delete a again', sub { $c->delete('a') });
op('delete_multi m1 m2 missing', sub { my @r = $c->delete_multi('m1', 'm2', 'missing'); \@r });

op('set n 10', sub { $c->set('n', 10) });
op('incr n 5', sub { $c->incr('n', 5) });
op('decr n 3', sub { $c->decr('n', 3) });
op('decr n 100 (floors at 0)', sub { $c->decr('n', 100) });
op('incr n (default 1)', sub { $c->incr('n') });
op('incr_multi', sub { my @r = $c->incr_multi(['n', 2], 'missing'); \@r });
op('set big 2^64-1', sub { $c->set('big', '18446744073709551615') });
op('incr big 1 (wraps)', sub { $c->incr('big', 1) });
op('incr missing', sub { $c->incr('missing', 1) });
op('decr missing', sub { $c->decr('missing', 1) });
op('incr c (non-numeric)', sub { $c->incr('c', 1) });
op('get c after failed incr', sub { $c->get('c') });

op('touch c', sub { $c->touch('c', 100) });
op('touch missing', sub { $c->touch('missing', 100) });
op('gat c', sub { $c->gat(100, 'c') });
op('gat missing', sub { $c->gat(100, 'missing') });
op('gats c', sub { my $r = $c->gats(100, 'c'); $r ? $r->[1] : undef });
op('gat_multi c d missing', sub { my $h = $c->gat_multi(100, 'c', 'd', 'missing'); [map { "$_=$h->{$_}" } sort keys %$h] });

my $big = large_value(LARGE);
op('set large 500KB', sub { $c->set('large', $big) });
op('get large', sub { $c->get('large') });
op('get large equal', sub { ($c->get('large') // '') eq $big ? 1 : 0 });
op('set toolarge 2MB (client max_size)', sub { $c->set('toolarge', large_value(TOO_LARGE)) });
op('set toolarge 2MB (unchecked)', sub { $raw->set('toolarge', large_value(TOO_LARGE)) });
op('get toolarge', sub { $c->get('toolarge') });
op('get c after too large (same client)', sub { $raw->get('c') });

my $bin = binary_value();
op('set bin', sub { $c->set('bin', $bin) });
op('get bin equal', sub { ($c->get('bin') // '') eq $bin ? 1 : 0 });
op('set empty', sub { $c->set('empty', '') });
op('get empty', sub { $c->get('empty') });

my $ukey = "\x{43a}\x{43b}\x{44e}\x{447}-\x{fc}";
op('set unicode key (utf8 client)', sub { $u8->set($ukey, "\x{437}\x{43d}\x{430}\x{447}") });
op('get unicode key (utf8 client)', sub { my $v = $u8->get($ukey); defined $v ? join(',', map { ord } split //, $v) : undef });
op('set key with space (unchecked)', sub { $raw->set('has space', 'x') });
op('get has (after space key)', sub { $raw->get('has') });
op('set key 250 chars', sub { $c->set('k' x 250, 'x') });
op('get key 250 chars', sub { $c->get('k' x 250) });
op('set key 251 chars (unchecked)', sub { $raw->set('k' x 251, 'x') });
op('get key 251 chars (unchecked)', sub { $raw->get('k' x 251) });
op('get c after bad keys (same client)', sub { $raw->get('c') });

op('nowait_push', sub { $c->nowait_push; 'ok' });
op('set ttl ' . TTL, sub { $c->set('ttl', 'short', TTL) });
op('get ttl now', sub { $c->get('ttl') });
op('set negative expire', sub { $c->set('neg', 'gone', -1) });
op('get negative expire', sub { $c->get('neg') });
select(undef, undef, undef, TTL_WAIT);
op('get ttl after expiry', sub { $c->get('ttl') });

op('flush_all', sub { [values %{ $c->flush_all }] });
op('get c after flush', sub { $c->get('c') });
op('server_versions', sub { [values %{ $c->server_versions }] });
$_->disconnect_all for $c, $u8, $raw;
