#!/usr/bin/env ruby
# frozen_string_literal: true

# The fixed client scenario through Dalli 3.0.6 (Debian's ruby-dalli), which speaks only memcached's
# binary protocol. Usage:
#
#   ruby dalli_scenario.rb host:port                 the whole scenario
#   ruby dalli_scenario.rb host:port USER PASSWORD   against a server started with SASL (-S): the
#                                                    right password, then a wrong one
#
# With --tls CA_FILE anywhere after the address, every connection is TLS (Dalli's ssl_context), verified
# against that CA, and the scenario is tls_scenario: Dalli 3.0.6's get_multi fails over TLS (it calls
# #server on the OpenSSL socket it selected), so that scenario and the SASL one leave multi-gets out.
#
# Every operation prints one line "<op> -> <result>" so that the Go test can diff the run against
# memcached with the run against leasecached. Only CAS values differ legitimately; they print as
# "cas=<n>". The server's address shows in some results (stats and version are keyed by it, errors
# name it); the Go test replaces it.
require 'dalli'
require 'digest'
require 'logger'

# Longest value shown verbatim; longer ones as length + digest.
SHOW_MAX = 64
# A large value that fits memcached's default 1 MiB item limit, and one that does not.
LARGE = 500 * 1024
TOO_LARGE = 2 * 1024 * 1024
# See ../python/pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
TTL = 2
TTL_WAIT = 3.1
# Socket timeout in seconds: loopback, generous.
TIMEOUT = 5
# Stats whose values are deterministic for a fixed scenario on a fresh server (see ../python/common.py).
STABLE_STATS = %w[cmd_get cmd_set cmd_flush cmd_touch get_hits get_misses get_flushed
                  delete_hits delete_misses incr_hits incr_misses decr_hits decr_misses
                  cas_hits cas_misses cas_badval touch_hits touch_misses curr_items threads
                  evictions version pointer_size limit_maxbytes].freeze

# Warnings only (a server marked down, a failed authentication), without timestamps or pids.
Dalli.logger = Logger.new($stdout, level: Logger::WARN, formatter: proc { |sev, _t, _p, msg| "log #{sev}: #{msg}\n" })

def show(v)
  case v
  when String
    return "String len=#{v.bytesize} sha1=#{Digest::SHA1.hexdigest(v)[0, 16]}" if v.bytesize > SHOW_MAX

    v.b.inspect
  when Hash
    '{' + v.keys.sort_by(&:to_s).map { |k| "#{show(k)}: #{show(v[k])}" }.join(', ') + '}'
  when Array
    '[' + v.map { |x| show(x) }.join(', ') + ']'
  else
    v.inspect
  end
end

def op(name)
  r = yield
  puts "#{name} -> #{show(r)}"
  $stdout.flush
  r
rescue StandardError, NotImplementedError => e
  puts "#{name} -> raise #{e.class}: #{e.message}"
  $stdout.flush
  nil
end

# A storage operation: Dalli returns the item's new CAS (an Integer, 0 when not stored) or true/false.
def store(name)
  op(name) do
    r = yield
    r.is_a?(Integer) && r != 0 ? "cas=#{r}" : r
  end
end

def binary_value
  up = (0..255).map(&:chr).join.b
  up + "\r\nEND\r\n".b + up.reverse
end

def large_value(n)
  out = +''.b
  i = 0
  while out.bytesize < n
    out << Digest::SHA256.digest(i.to_s)
    i += 1
  end
  out.byteslice(0, n)
end

# Dalli's ssl_context when the run is over TLS (--tls CA_FILE), else nil.
$ssl_context = nil

def client(addr, extra = {})
  # socket_max_failures 1 and no failure delay: an error shows at once, and deterministically; a server
  # marked down is retried at the next operation (down_retry_delay 0).
  opts = { socket_timeout: TIMEOUT, socket_max_failures: 1, socket_failure_delay: nil,
           down_retry_delay: 0, compress: false }
  opts[:ssl_context] = $ssl_context if $ssl_context
  Dalli::Client.new(addr, opts.merge(extra))
end

def stats_lines(name, all)
  s = all.values.first || {}
  # One line per stat name, so that a diff names each missing or extra stat.
  s.keys.sort.each { |k| puts "#{name} has #{k}" }
  STABLE_STATS.each { |k| puts "#{name} #{k} -> #{s[k].inspect}" }
  $stdout.flush
end

def scenario(addr)
  c = client(addr)
  raw = { raw: true }

  op('version') { c.version }
  op('flush') { c.flush }
  store('set a') { c.set('a', 'alpha', nil, raw) }
  store('set obj (marshalled)') { c.set('obj', { 'x' => [1, 2] }) }
  op('get a') { c.get('a') }
  op('get obj') { c.get('obj') }
  op('get missing') { c.get('missing') }
  op('get_multi a obj missing') { c.get_multi('a', 'obj', 'missing') }
  op('get_multi none present') { c.get_multi('missing1', 'missing2') }
  op('get_multi 30 keys') do
    c.multi { 30.times { |i| c.set("k#{i}", "v#{i}", nil, raw) } }
    h = c.get_multi((0...35).map { |i| "k#{i}" })
    [h.size, h['k0'], h['k29'], h.key?('k30')]
  end
  op('multi set/add/replace/delete (quiet)') do
    c.multi do
      c.set('q1', 'one', nil, raw)
      c.set('q2', 'two', nil, raw)
      c.add('q1', 'not added', nil, raw)
      c.add('q3', 'three', nil, raw)
      c.replace('q2', 'TWO', nil, raw)
      c.replace('qmissing', 'x', nil, raw)
      c.delete('q3')
      c.delete('qmissing')
    end
  end
  op('get_multi after multi') { c.get_multi('q1', 'q2', 'q3', 'qmissing') }
  op('multi 500 sets (quiet), then get_multi 600 keys') do
    c.multi { 500.times { |i| c.set("bulk#{i}", "v#{i}" * (i % 50), nil, raw) } }
    h = c.get_multi((0...600).map { |i| "bulk#{i}" })
    [h.size, Digest::SHA1.hexdigest(h.keys.sort.map { |k| "#{k}=#{h[k]}" }.join(','))[0, 16]]
  end
  op('get_multi 20 values of 100 KB') do
    c.multi { 20.times { |i| c.set("big#{i}", large_value(100 * 1024 + i), nil, raw) } }
    h = c.get_multi((0...20).map { |i| "big#{i}" })
    [h.size, h.values.map(&:bytesize).sum, h.all? { |k, val| val == large_value(100 * 1024 + k.delete('big').to_i) }]
  end
  store('add a (exists)') { c.add('a', 'x', nil, raw) }
  store('add c') { c.add('c', 'gamma', nil, raw) }
  store('replace a') { c.replace('a', 'alpha2', nil, raw) }
  store('replace missing') { c.replace('missing', 'x', nil, raw) }
  op('append a') { c.append('a', '+app') }
  op('prepend a') { c.prepend('a', 'pre+') }
  op('get a after append/prepend') { c.get('a', raw) }
  op('append missing') { c.append('missing', 'x') }
  op('prepend missing') { c.prepend('missing', 'x') }

  v, cas = c.get_cas('a')
  puts "get_cas a -> #{show(v)} cas=#{cas.inspect}"
  op('set_cas a (current)') { c.set_cas('a', 'swapped', cas, nil, raw) ? 'cas=<ok>' : false }
  op('set_cas a (stale)') { c.set_cas('a', 'again', cas, nil, raw) }
  op('get a after set_cas') { c.get('a') }
  store('replace_cas missing') { c.replace_cas('missing', 'x', cas, nil, raw) }
  store('cas block a') { c.cas('a', nil, raw) { |old| "#{old}+cas" } }
  store('cas block missing') { c.cas('missing', nil, raw) { |old| "#{old}+cas" } }
  store('cas! block missing2') { c.cas!('missing2', nil, raw) { |old| "#{old.inspect}+cas" } }
  op('get a after cas blocks') { c.get('a') }
  op('get missing2 after cas!') { c.get('missing2') }
  op('get_multi_cas a c missing') do
    c.get_multi_cas('a', 'c', 'missing').transform_values { |val, cs| [val, cs.is_a?(Integer) && cs.positive?] }
  end
  v2, cas2 = c.get_cas('c')
  op('delete_cas c (stale)') { c.delete_cas('c', cas2 + 1000) }
  op('delete_cas c (current)') { c.delete_cas('c', cas2) ? 'cas=<ok>' : false }
  op('get c after delete_cas') { [v2, c.get('c')] }
  store('add c again') { c.add('c', 'gamma', nil, raw) ? 'cas=<ok>' : false }

  op('delete a') { c.delete('a') }
  op('delete a again') { c.delete('a') }

  store('set n 10') { c.set('n', '10', nil, raw) }
  op('incr n 5') { c.incr('n', 5) }
  op('decr n 3') { c.decr('n', 3) }
  op('decr n 100 (floors at 0)') { c.decr('n', 100) }
  op('incr n (default 1)') { c.incr('n') }
  store('set big 2^64-1') { c.set('big', '18446744073709551615', nil, raw) }
  op('incr big 1 (wraps)') { c.incr('big', 1) }
  op('incr missing (no default)') { c.incr('missing', 1) }
  op('decr missing (no default)') { c.decr('missing', 1) }
  op('incr counter (default 7)') { c.incr('counter', 1, nil, 7) }
  op('incr counter again') { c.incr('counter', 1, nil, 7) }
  op('decr dcounter (default 3)') { c.decr('dcounter', 1, nil, 3) }
  op('get counter') { c.get('counter', raw) }
  op('incr c (non-numeric)') { c.incr('c', 1) }
  op('get c after failed incr') { c.get('c') }
  op('incr obj (marshalled)') { c.incr('obj', 1) }

  op('touch c') { c.touch('c', 100) }
  op('touch missing') { c.touch('missing', 100) }
  op('gat c') { c.gat('c', 100) }
  op('gat missing') { c.gat('missing', 100) }
  op('fetch c') { c.fetch('c', 100) { 'computed' } }
  op('fetch f (missing: block, then add)') { c.fetch('f', 100, raw) { 'computed' } }
  op('get f after fetch') { c.get('f') }

  big = large_value(LARGE)
  store('set large 500KB') { c.set('large', big, nil, raw) }
  op('get large') { c.get('large') }
  op('get large equal') { c.get('large') == big }
  store('set toolarge 2MB (client refuses)') { c.set('toolarge', large_value(TOO_LARGE), nil, raw) }
  nolimit = client(addr, value_max_bytes: 10 * 1024 * 1024)
  store('set toolarge 2MB (sent)') { nolimit.set('toolarge', large_value(TOO_LARGE), nil, raw) }
  op('get toolarge') { nolimit.get('toolarge') }
  op('get c after too large') { nolimit.get('c') }

  bin = binary_value
  store('set bin') { c.set('bin', bin, nil, raw) }
  op('get bin equal') { c.get('bin') == bin }
  store('set empty') { c.set('empty', '', nil, raw) }
  op('get empty') { c.get('empty') }
  store('set unicode key') { c.set('ключ-ü', 'значение', nil, raw) }
  op('get unicode key') { c.get('ключ-ü')&.force_encoding('UTF-8') }
  store('set key with space') { c.set('has space', 'x', nil, raw) }
  op('get key with space') { c.get('has space') }
  store('set key 250 chars') { c.set('k' * 250, 'x', nil, raw) }
  op('get key 250 chars') { c.get('k' * 250) }
  store('set key 251 chars (client hashes it)') { c.set('k' * 251, 'long', nil, raw) }
  op('get key 251 chars') { c.get('k' * 251) }

  # Over 30 days Dalli sends the TTL as an absolute Unix time.
  store('set ttl 40 days (absolute)') { c.set('ttl40d', 'long', 40 * 24 * 3600, raw) }
  op('get ttl 40 days') { c.get('ttl40d') }
  store("set ttl #{TTL}") { c.set('ttl', 'short', TTL, raw) }
  op('get ttl now') { c.get('ttl') }
  store('set gat-ttl (no expiry)') { c.set('gatttl', 'g', nil, raw) }
  op("gat gat-ttl #{TTL}") { c.gat('gatttl', TTL) }
  store('set touch-ttl (no expiry)') { c.set('touchttl', 't', nil, raw) }
  op("touch touch-ttl #{TTL}") { c.touch('touchttl', TTL) }
  op('incr tcounter (default 0, ttl)') { c.incr('tcounter', 4, TTL, 0) }
  op('get tcounter now') { c.get('tcounter') }
  sleep TTL_WAIT
  op('get ttl after expiry') { c.get('ttl') }
  op('get tcounter after expiry') { c.get('tcounter') }
  op('get gat-ttl after expiry') { c.get('gatttl') }
  op('get touch-ttl after expiry') { c.get('touchttl') }
  op('get_multi after expiry') { c.get_multi('ttl', 'c', 'bin', 'empty').keys.sort }

  stats_lines('stats', c.stats)
  op('stats items non-empty') { !c.stats(:items).values.first.empty? }
  op('stats slabs non-empty') { !c.stats(:slabs).values.first.empty? }
  op('stats settings has maxbytes') { c.stats(:settings).values.first['maxbytes'] }
  op('reset_stats') { c.reset_stats }
  op('stats after reset get_hits') { c.stats.values.first['get_hits'] }
  op('flush') { c.flush }
  op('get c after flush') { c.get('c') }
  op('flush delay 0') { c.flush(0) }
  op('version') { c.version }
  c.close
end

# Over TLS: every single-key operation, quiet stores, a large value, stats.
def tls_scenario(addr)
  c = client(addr)
  raw = { raw: true }
  op('version') { c.version }
  op('flush') { c.flush }
  store('set a') { c.set('a', 'alpha', nil, raw) }
  op('get a') { c.get('a') }
  op('get missing') { c.get('missing') }
  store('add a (exists)') { c.add('a', 'x', nil, raw) }
  store('replace a') { c.replace('a', 'alpha2', nil, raw) }
  op('append a') { c.append('a', '+app') }
  op('prepend a') { c.prepend('a', 'pre+') }
  op('get a after append/prepend') { c.get('a') }
  store('cas block a') { c.cas('a', nil, raw) { |old| "#{old}+cas" } }
  op('get a after cas') { c.get('a') }
  op('multi 500 sets (quiet)') { c.multi { 500.times { |i| c.set("bulk#{i}", "v#{i}" * (i % 50), nil, raw) } } }
  op('get each of 500') { (0...500).all? { |i| c.get("bulk#{i}") == "v#{i}" * (i % 50) } }
  op('incr counter (default 7)') { c.incr('counter', 1, nil, 7) }
  op('incr counter again') { c.incr('counter', 1, nil, 7) }
  op('decr counter 100') { c.decr('counter', 100) }
  op('touch a') { c.touch('a', 100) }
  op('gat a') { c.gat('a', 100) }
  big = large_value(LARGE)
  store('set large 500KB') { c.set('large', big, nil, raw) }
  op('get large equal') { c.get('large') == big }
  op('delete a') { c.delete('a') }
  op('delete a again') { c.delete('a') }
  stats_lines('stats', c.stats)
  op('flush') { c.flush }
  op('get counter after flush') { c.get('counter') }
  c.close
end

# Against a SASL server: the right password works for every kind of operation; a wrong one fails.
def sasl_scenario(addr, user, password)
  c = client(addr, username: user, password: password)
  store('auth: set') { c.set('s', 'secret value', nil, raw: true) }
  op('auth: get') { c.get('s') }
  op('auth: get_multi') { c.get_multi('s', 'missing') } unless $ssl_context
  op('auth: multi (quiet sets)') { c.multi { 50.times { |i| c.set("q#{i}", "v#{i}", nil, raw: true) } } }
  op('auth: get q49') { c.get('q49') }
  op('auth: gat') { c.gat('s', 100) }
  op('auth: incr with default') { c.incr('ctr', 1, nil, 5) }
  op('auth: delete') { c.delete('s') }
  op('auth: version') { c.version }
  op('auth: stats curr_items') { c.stats.values.first['curr_items'] }
  c.close

  bad = client(addr, username: user, password: "#{password}-wrong")
  op('wrong password: get') { bad.get('s') }
  # Dalli keeps the connection whose authentication failed, and sends this set unauthenticated: the
  # server answers AUTH_ERROR and closes it.
  store('wrong password: set') { bad.set('s', 'x', nil, raw: true) }
  bad.close
  # A client of its own: on the closed connection, whether the reset shows on Dalli's write or its read
  # (two messages) is a matter of timing.
  bad = client(addr, username: user, password: "#{password}-wrong")
  op('wrong password: version') { bad.version }
  bad.close

  none = client(addr)
  op('no credentials: get') { none.get('s') }
  none.close
end

args = ARGV.dup
if (i = args.index('--tls'))
  $ssl_context = OpenSSL::SSL::SSLContext.new
  $ssl_context.set_params(verify_mode: OpenSSL::SSL::VERIFY_PEER, ca_file: args[i + 1])
  args.slice!(i, 2)
end
if args.length == 3
  sasl_scenario(args[0], args[1], args[2])
elsif $ssl_context
  tls_scenario(args[0])
else
  scenario(args[0])
end
