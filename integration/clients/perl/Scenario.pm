# Shared helpers of the Perl client scenarios (see ../README.md).
#
# Every operation prints exactly one line "<op> -> <result>" so that the Go
# test can diff the run against memcached with the run against leasecached.
# Only CAS values differ legitimately; they are printed as "cas=<n>".
package Scenario;
use strict;
use warnings;
use Digest::SHA qw(sha1_hex);
use Exporter 'import';
our @EXPORT_OK = qw(op show stats_lines binary_value large_value LARGE TOO_LARGE);

# Longest value shown verbatim; longer ones as length + digest.
use constant SHOW_MAX => 64;
# A large value that fits memcached's default 1 MiB item limit, and one that does not.
use constant LARGE     => 500 * 1024;
use constant TOO_LARGE => 2 * 1024 * 1024;
# Stats whose values are deterministic for a fixed scenario on a fresh server.
# get_expired is not one: whether a get finds an expired item or a background
# reaper took it first is a matter of timing, on memcached as on leasecached.
# Nor is total_items: memcached itself varies by one between runs of the same
# scenario (an incr copies the item when another thread holds a reference to it).
my @STABLE_STATS = qw(cmd_get cmd_set cmd_flush cmd_touch get_hits get_misses
  get_flushed delete_hits delete_misses incr_hits incr_misses
  decr_hits decr_misses cas_hits cas_misses cas_badval touch_hits touch_misses
  curr_items threads evictions version pointer_size limit_maxbytes);

$| = 1;

sub show {
    my ($v) = @_;
    return 'undef' unless defined $v;
    if (ref $v eq 'HASH') {
        return '{' . join(', ', map { "$_: " . show($v->{$_}) } sort keys %$v) . '}';
    }
    if (ref $v eq 'ARRAY') {
        return '[' . join(', ', map { show($_) } @$v) . ']';
    }
    if (ref $v) {
        return ref($v);
    }
    if (length($v) > SHOW_MAX) {
        my $b = $v;
        utf8::encode($b) if utf8::is_utf8($b);
        return sprintf('len=%d sha1=%s', length($b), substr(sha1_hex($b), 0, 16));
    }
    (my $e = $v) =~ s/([^\x20-\x7e])/sprintf('\\x{%x}', ord($1))/ge;
    return "'$e'";
}

# op runs $fn in scalar context (the clients' documented result) and prints
# the result or the error it died with.
sub op {
    my ($name, $fn) = @_;
    my $r = eval { scalar $fn->() };
    if ($@) {
        (my $err = $@) =~ s/ at \S+ line \d+.*//s;
        print "$name -> die $err\n";
        return;
    }
    print "$name -> " . show($r) . "\n";
    return $r;
}

sub stats_lines {
    my ($name, $st) = @_;
    # One line per stat name, so that a diff names each missing or extra stat.
    print "$name has $_\n" for sort keys %$st;
    for my $k (@STABLE_STATS) {
        print "$name $k -> " . (defined $st->{$k} ? $st->{$k} : 'undef') . "\n";
    }
}

sub binary_value {
    return join('', map { chr } 0 .. 255) . "\r\nEND\r\n" . join('', map { chr } reverse 0 .. 255);
}

# A deterministic, incompressible-looking value of $n bytes.
sub large_value {
    my ($n) = @_;
    my $out = '';
    my $i = 0;
    while (length($out) < $n) {
        $out .= Digest::SHA::sha256($i++);
    }
    return substr($out, 0, $n);
}

1;
