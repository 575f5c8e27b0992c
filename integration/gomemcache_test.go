package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// Limits of the gomemcache test.
const (
	// gmcTimeout is the client's socket timeout: generous, loopback only.
	gmcTimeout = 2 * time.Second
	// gmcTooLarge is a value length over the default -I of 1 MiB.
	gmcTooLarge = 1<<20 + 1
)

// gmcLog records one API call's outcome as text, so that the two servers'
// runs can be compared line by line.
type gmcLog struct{ lines []string }

func (l *gmcLog) add(op string, result any, err error) {
	l.lines = append(l.lines, fmt.Sprintf("%s -> %s | %s", op, describeResult(result), describeErr(err)))
}

func describeErr(err error) string {
	for _, known := range []error{memcache.ErrCacheMiss, memcache.ErrCASConflict, memcache.ErrNotStored,
		memcache.ErrServerError, memcache.ErrNoStats, memcache.ErrMalformedKey, memcache.ErrNoServers} {
		if errors.Is(err, known) {
			return "sentinel " + known.Error()
		}
	}
	if err == nil {
		return "ok"
	}
	return "error " + err.Error()
}

func describeResult(r any) string {
	switch v := r.(type) {
	case nil:
		return "-"
	case *memcache.Item:
		if v == nil {
			return "nil item"
		}
		return fmt.Sprintf("item{%s %q flags=%d}", v.Key, truncate(v.Value, 64), v.Flags)
	case map[string]*memcache.Item:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s ", describeResult(v[k]))
		}
		return "map{" + b.String() + "}"
	}
	return fmt.Sprint(r)
}

// gmcCase drives the client through one scenario, keys built with k().
type gmcCase struct {
	name string
	run  func(c *memcache.Client, k func(string) string, l *gmcLog)
}

// TestGomemcacheDifferential exercises every exported API of gomemcache
// against memcached and leasecached and requires identical outcomes. The
// cases run sequentially because FlushAll/DeleteAll are server-wide.
func TestGomemcacheDifferential(t *testing.T) {
	mc, lc := startPair(t)
	for i, tc := range gomemcacheCases() {
		t.Run(tc.name, func(t *testing.T) {
			results := make([][]string, 2)
			for j, d := range []*daemon{mc, lc} {
				c := memcache.New(d.addr)
				c.Timeout = gmcTimeout
				prefix := fmt.Sprintf("g%03d_", i)
				k := func(s string) string { return prefix + s }
				var l gmcLog
				tc.run(c, k, &l)
				_ = c.Close()
				results[j] = l.lines
			}
			want, got := strings.Join(results[0], "\n"), strings.Join(results[1], "\n")
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached:\n%s", want)
			}
			if want != got {
				t.Errorf("leasecached differs from memcached\nmemcached:\n%s\nleasecached:\n%s", want, got)
			}
		})
	}
}

func gomemcacheCases() []gmcCase {
	set := func(c *memcache.Client, l *gmcLog, key, val string, flags uint32) {
		l.add("Set "+key, nil, c.Set(&memcache.Item{Key: key, Value: []byte(val), Flags: flags}))
	}
	get := func(c *memcache.Client, l *gmcLog, key string) {
		it, err := c.Get(key)
		l.add("Get "+key, it, err)
	}
	return []gmcCase{
		{"Get miss", func(c *memcache.Client, k func(string) string, l *gmcLog) { get(c, l, k("a")) }},
		{"Set Get", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "hello", 42)
			get(c, l, k("a"))
			set(c, l, k("a"), "", 4294967295)
			get(c, l, k("a"))
		}},
		{"Set binary value", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "a\r\nEND\r\n\x00\xff", 1)
			get(c, l, k("a"))
		}},
		{"Set expired", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Set -1", nil, c.Set(&memcache.Item{Key: k("a"), Value: []byte("x"), Expiration: -1}))
			get(c, l, k("a"))
		}},
		{"GetMulti", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "1", 1)
			set(c, l, k("c"), "3", 3)
			m, err := c.GetMulti([]string{k("a"), k("b"), k("c"), k("d")})
			l.add("GetMulti", m, err)
			m, err = c.GetMulti([]string{k("x"), k("y")})
			l.add("GetMulti all miss", m, err)
			m, err = c.GetMulti(nil)
			l.add("GetMulti none", m, err)
		}},
		{"Add", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Add new", nil, c.Add(&memcache.Item{Key: k("a"), Value: []byte("1")}))
			l.add("Add existing", nil, c.Add(&memcache.Item{Key: k("a"), Value: []byte("2")}))
			get(c, l, k("a"))
		}},
		{"Replace", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Replace missing", nil, c.Replace(&memcache.Item{Key: k("a"), Value: []byte("1")}))
			set(c, l, k("a"), "1", 0)
			l.add("Replace existing", nil, c.Replace(&memcache.Item{Key: k("a"), Value: []byte("2"), Flags: 9}))
			get(c, l, k("a"))
		}},
		{"Append Prepend", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Append missing", nil, c.Append(&memcache.Item{Key: k("a"), Value: []byte("x")}))
			l.add("Prepend missing", nil, c.Prepend(&memcache.Item{Key: k("a"), Value: []byte("x")}))
			set(c, l, k("a"), "mid", 5)
			l.add("Append", nil, c.Append(&memcache.Item{Key: k("a"), Value: []byte(">"), Flags: 1}))
			l.add("Prepend", nil, c.Prepend(&memcache.Item{Key: k("a"), Value: []byte("<"), Flags: 2}))
			get(c, l, k("a"))
		}},
		{"CompareAndSwap", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "v1", 0)
			it, err := c.Get(k("a"))
			l.add("Get for CAS", it, err)
			if it == nil {
				return
			}
			stale := *it
			it.Value = []byte("v2")
			l.add("CAS current", nil, c.CompareAndSwap(it))
			stale.Value = []byte("v3")
			l.add("CAS stale", nil, c.CompareAndSwap(&stale))
			get(c, l, k("a"))
			l.add("Delete", nil, c.Delete(k("a")))
			l.add("CAS deleted", nil, c.CompareAndSwap(it))
			l.add("CAS never fetched", nil, c.CompareAndSwap(&memcache.Item{Key: k("b"), Value: []byte("x")}))
		}},
		{"Delete", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "1", 0)
			l.add("Delete existing", nil, c.Delete(k("a")))
			l.add("Delete missing", nil, c.Delete(k("a")))
			get(c, l, k("a"))
		}},
		{"Increment Decrement", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			v, err := c.Increment(k("n"), 1)
			l.add("Increment missing", v, err)
			v, err = c.Decrement(k("n"), 1)
			l.add("Decrement missing", v, err)
			set(c, l, k("n"), "10", 0)
			v, err = c.Increment(k("n"), 5)
			l.add("Increment", v, err)
			v, err = c.Decrement(k("n"), 100)
			l.add("Decrement below zero", v, err)
			v, err = c.Increment(k("n"), 18446744073709551615)
			l.add("Increment max", v, err)
			v, err = c.Increment(k("n"), 2)
			l.add("Increment wraps", v, err)
			get(c, l, k("n"))
			set(c, l, k("s"), "abc", 0)
			v, err = c.Increment(k("s"), 1)
			l.add("Increment non-numeric", v, err)
		}},
		{"Touch GetAndTouch", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Touch missing", nil, c.Touch(k("a"), 100))
			set(c, l, k("a"), "1", 3)
			l.add("Touch", nil, c.Touch(k("a"), 100))
			it, err := c.GetAndTouch(k("a"), 200)
			l.add("GetAndTouch", it, err)
			it, err = c.GetAndTouch(k("b"), 200)
			l.add("GetAndTouch missing", it, err)
			l.add("Touch to past", nil, c.Touch(k("a"), -1))
			get(c, l, k("a"))
		}},
		{"Malformed keys", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			for _, key := range []string{k("has space"), k("ctl\x01"), strings.Repeat("k", 251)} {
				it, err := c.Get(key)
				l.add("Get malformed", it, err)
				l.add("Set malformed", nil, c.Set(&memcache.Item{Key: key, Value: []byte("x")}))
				l.add("Delete malformed", nil, c.Delete(key))
			}
			long := strings.Repeat("k", 250)
			set(c, l, long, "250", 0)
			get(c, l, long)
			l.add("Delete 250", nil, c.Delete(long))
		}},
		{"Too large value", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "old", 0)
			l.add("Set too large", nil, c.Set(&memcache.Item{Key: k("a"), Value: bytes.Repeat([]byte("x"), gmcTooLarge)}))
			get(c, l, k("a"))
			l.add("Add too large", nil, c.Add(&memcache.Item{Key: k("b"), Value: bytes.Repeat([]byte("x"), gmcTooLarge)}))
			get(c, l, k("b"))
		}},
		{"Ping", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			l.add("Ping", nil, c.Ping())
		}},
		// Server-wide from here on.
		{"FlushAll", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "1", 0)
			l.add("FlushAll", nil, c.FlushAll())
			get(c, l, k("a"))
			set(c, l, k("a"), "2", 0)
			get(c, l, k("a"))
		}},
		{"DeleteAll", func(c *memcache.Client, k func(string) string, l *gmcLog) {
			set(c, l, k("a"), "1", 0)
			l.add("DeleteAll", nil, c.DeleteAll())
			get(c, l, k("a"))
		}},
	}
}

// TestGomemcacheNoServers covers the one error that needs no server at all,
// so that every exported error value of the client is exercised.
func TestGomemcacheNoServers(t *testing.T) {
	c := memcache.New()
	if _, err := c.Get("k"); !errors.Is(err, memcache.ErrNoServers) {
		t.Errorf("Get with no servers: got %v, want ErrNoServers", err)
	}
	if err := c.Ping(); err != nil {
		t.Errorf("Ping with no servers: got %v, want nil (nothing to ping)", err)
	}
}
