#!/usr/bin/perl
# The fixed client scenario through Cache::Memcached (pure Perl, text protocol).
# Usage: cache_memcached.pl host:port
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Cache::Memcached;
use Scenario qw(op stats_lines binary_value large_value LARGE TOO_LARGE);

# See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
use constant TTL      => 2;
use constant TTL_WAIT => 3.1;

my $addr = shift or die "usage: $0 host:port\n";
my $c = Cache::Memcached->new({ servers => [$addr], compress_threshold => 0, connect_timeout => 2 });
$c->enable_compress(0);

op('flush_all', sub { $c->flush_all });
op('set a', sub { $c->set('a', 'alpha') });
op('set r (ref, Storable)', sub { $c->set('r', { x => [1, 2] }) });
op('get a', sub { $c->get('a') });
op('get r', sub { $c->get('r')->{x} });
op('get missing', sub { $c->get('missing') });
op('get_multi a r missing', sub { my $h = $c->get_multi('a', 'r', 'missing'); [sort keys %$h] });
op('add a (exists)', sub { $c->add('a', 'x') });
op('add c', sub { $c->add('c', 'gamma') });
op('replace a', sub { $c->replace('a', 'alpha2') });
op('replace missing', sub { $c->replace('missing', 'x') });
op('append a', sub { $c->append('a', '+app') });
op('prepend a', sub { $c->prepend('a', 'pre+') });
op('get a after append/prepend', sub { $c->get('a') });
op('append missing', sub { $c->append('missing', 'x') });
op('delete a', sub { $c->delete('a') });
op('delete a again', sub { $c->delete('a') });

op('set n 10', sub { $c->set('n', 10) });
op('incr n 5', sub { $c->incr('n', 5) });
op('decr n 3', sub { $c->decr('n', 3) });
op('decr n 100 (floors at 0)', sub { $c->decr('n', 100) });
op('incr n (default 1)', sub { $c->incr('n') });
op('set big 2^64-1', sub { $c->set('big', '18446744073709551615') });
op('incr big 1 (wraps)', sub { $c->incr('big', 1) });
op('incr missing', sub { $c->incr('missing', 1) });
op('decr missing', sub { $c->decr('missing', 1) });
op('incr c (non-numeric)', sub { $c->incr('c', 1) });
op('get c after failed incr', sub { $c->get('c') });

my $big = large_value(LARGE);
op('set large 500KB', sub { $c->set('large', $big) });
op('get large', sub { $c->get('large') });
op('get large equal', sub { ($c->get('large') // '') eq $big ? 1 : 0 });
op('set toolarge 2MB', sub { $c->set('toolarge', large_value(TOO_LARGE)) });
op('get toolarge', sub { $c->get('toolarge') });
op('get c after too large', sub { $c->get('c') });

my $bin = binary_value();
op('set bin', sub { $c->set('bin', $bin) });
op('get bin equal', sub { ($c->get('bin') // '') eq $bin ? 1 : 0 });
op('set empty', sub { $c->set('empty', '') });
op('get empty', sub { $c->get('empty') });

my $ukey = "\x{43a}\x{43b}\x{44e}\x{447}-\x{fc}";
my $uval = "\x{437}\x{43d}\x{430}\x{447}";
utf8::encode($ukey);
utf8::encode($uval);
op('set utf-8 key', sub { $c->set($ukey, $uval) });
op('get utf-8 key', sub { $c->get($ukey) });
op('set key with space', sub { $c->set('has space', 'x') });
op('get has (after space key)', sub { $c->get('has') });
op('set key 250 chars', sub { $c->set('k' x 250, 'x') });
op('get key 250 chars', sub { $c->get('k' x 250) });
op('set key 251 chars', sub { $c->set('k' x 251, 'x') });
op('get key 251 chars', sub { $c->get('k' x 251) });
op('get c after bad keys', sub { $c->get('c') });

op('set ttl ' . TTL, sub { $c->set('ttl', 'short', TTL) });
op('get ttl now', sub { $c->get('ttl') });
select(undef, undef, undef, TTL_WAIT);
op('get ttl after expiry', sub { $c->get('ttl') });

my $st = $c->stats(['misc']);
my ($host) = keys %{ $st->{hosts} || {} };
stats_lines('stats', $host ? $st->{hosts}{$host}{misc} : {});
my $malloc = $c->stats(['malloc']);
op('stats malloc', sub { my ($h) = keys %{ $malloc->{hosts} || {} }; $h ? [sort keys %{ $malloc->{hosts}{$h}{malloc} }] : 'no host' });
my $items = $c->stats(['items']);
op('stats items has number', sub { my ($h) = keys %{ $items->{hosts} || {} }; ($h && $items->{hosts}{$h}{items} =~ /STAT items:\d+:number \d+/) ? 1 : 0 });
op('flush_all', sub { $c->flush_all });
op('get c after flush', sub { $c->get('c') });
$c->disconnect_all;
