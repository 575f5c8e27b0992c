package server

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/hotkeys"
	bp "github.com/leasecached/leasecached/protocol/binprot"
	"github.com/leasecached/leasecached/shard"
)

// newHotServer is a server with hot-key detection listing top keys, over a store whose clock (seconds
// and nanoseconds) is the returned one.
func newHotServer(t *testing.T, top int) (*Server, *atomic.Int64) {
	t.Helper()
	var clock atomic.Int64
	clock.Store(1000*int64(time.Second) + int64(time.Second)/2)
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1,
		Now: func() int64 { return clock.Load() / int64(time.Second) }, NowNano: clock.Load})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return New(Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, MaxItemSize: 1 << 20,
		MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler), HotKeys: top}, store), &clock
}

// hotStats parses `stats hotkeys` into its header values and one map per listed key, rank order.
func hotStats(t *testing.T, out string) (map[string]string, []map[string]string) {
	t.Helper()
	require.True(t, strings.HasSuffix(out, "END\r\n"), out)
	head := map[string]string{}
	var keys []map[string]string
	for _, l := range strings.Split(strings.TrimSuffix(out, "END\r\n"), "\r\n") {
		if l == "" {
			continue
		}
		f := strings.Split(l, " ")
		require.Len(t, f, 3, l)
		require.Equal(t, "STAT", f[0], l)
		name, ok := strings.CutPrefix(f[1], "hotkey:")
		if !ok {
			head[f[1]] = f[2]
			continue
		}
		rank, field, _ := strings.Cut(name, ":")
		r, err := strconv.Atoi(rank)
		require.NoError(t, err, l)
		if r > len(keys) {
			require.Equal(t, len(keys)+1, r, "ranks in order")
			keys = append(keys, map[string]string{})
		}
		keys[r-1][field] = f[2]
	}
	return head, keys
}

// TestHotKeysCountEveryProtocol: each keyed command of the text, meta and binary protocols counts its
// key(s), as a read or a write (doc/design/hotkeys.md), and `stats hotkeys` lists them.
func TestHotKeysCountEveryProtocol(t *testing.T) {
	const n = 4800 // requests of each case: ~300 sampled
	cases := []struct {
		name   string
		req    string
		keys   []string // what is listed, each with an equal share
		writes bool
	}{
		{"get", "get hot\r\n", []string{"hot"}, false},
		{"multi-key get counts per key, keys URL-encoded", "get a:1 b c d\r\n", []string{"a%3A1", "b", "c", "d"}, false},
		{"gets", "gets hot\r\n", []string{"hot"}, false},
		{"gat", "gat 0 hot\r\n", []string{"hot"}, false},
		{"set", "set hot 0 0 1\r\nx\r\n", []string{"hot"}, true},
		{"cas", "cas hot 0 0 1 1\r\nx\r\n", []string{"hot"}, true},
		{"append", "append hot 0 0 1\r\nx\r\n", []string{"hot"}, true},
		{"delete", "delete hot\r\n", []string{"hot"}, true},
		{"incr", "incr hot 1\r\n", []string{"hot"}, true},
		{"touch", "touch hot 0\r\n", []string{"hot"}, true},
		{"lease-get", "lease-get hot\r\n", []string{"hot"}, false},
		{"lease-set", "lease-set hot 5 0 0 1\r\nx\r\n", []string{"hot"}, true},
		{"mg", "mg hot v\r\n", []string{"hot"}, false},
		{"mg of a base64 key counts the key", "mg aG90 b v\r\n", []string{"hot"}, false},
		{"ms", "ms hot 1\r\nx\r\n", []string{"hot"}, true},
		{"md", "md hot q\r\n", []string{"hot"}, true},
		{"ma", "ma hot\r\n", []string{"hot"}, true},
		{"binary get", bpkt(bp.OpGetKQ, "hot", "", "", 0), []string{"hot"}, false},
		{"binary set", bpkt(bp.OpSetQ, "hot", setExt(0, 0), "x", 0), []string{"hot"}, true},
		{"binary delete", bpkt(bp.OpDeleteQ, "hot", "", "", 0), []string{"hot"}, true},
		{"binary touch", bpkt(bp.OpTouch, "hot", u32(0), "", 0), []string{"hot"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newHotServer(t, DefaultHotKeys)
			cn, fc := newConn(s, nil), &fakeConn{}
			batch := strings.Repeat(tc.req, 16)
			for range n / 16 {
				fc.out.Reset()
				feed(cn, fc, batch)
			}
			fc.out.Reset()
			head, keys := hotStats(t, s.appendHotKeyStatsString())
			assert.Equal(t, map[string]string{"hotkeys_sample_rate": "16", "hotkeys_window_seconds": "2"}, head)
			require.Len(t, keys, len(tc.keys))
			total := 0.0
			for i, k := range keys {
				assert.Contains(t, tc.keys, k["key"], "rank %d", i+1)
				share, err := strconv.ParseFloat(k["share"], 64)
				require.NoError(t, err)
				total += share
				assert.InDelta(t, 100/float64(len(tc.keys)), share, 40/float64(len(tc.keys)), "share of %s", k["key"])
				rate, _ := strconv.Atoi(k["rate"])
				// n requests of each key over the span: the last window (idle before) and half of this one.
				assert.InEpsilon(t, float64(n)/1.5, float64(rate), 0.3, "rate of %s", k["key"])
				reads, writes := k["reads"], k["writes"]
				if tc.writes {
					assert.Equal(t, "0", reads)
					assert.Equal(t, k["rate"], writes)
				} else {
					assert.Equal(t, k["rate"], reads)
					assert.Equal(t, "0", writes)
				}
			}
			assert.InDelta(t, 100, total, 0.1)
		})
	}
}

// appendHotKeyStatsString is `stats hotkeys` as a text client gets it.
func (s *Server) appendHotKeyStatsString() string {
	cn, fc := newConn(s, nil), &fakeConn{}
	out, _ := feed(cn, fc, "stats hotkeys\r\n")
	return out
}

// TestHotKeysRanksAndCoolDown: keys are ranked by rate, a key is listed until two windows after its last
// request, the list is bounded by --hot-keys, and an idle server lists nothing.
func TestHotKeysRanksAndCoolDown(t *testing.T) {
	s, clock := newHotServer(t, 3)
	head, keys := hotStats(t, s.appendHotKeyStatsString())
	assert.Len(t, head, 2)
	assert.Empty(t, keys, "idle")
	cn, fc := newConn(s, nil), &fakeConn{}
	var b strings.Builder
	for i := range 5 { // key i is requested 5-i times a round
		for range 5 - i {
			fmt.Fprintf(&b, "get k%d\r\n", i)
		}
	}
	round := b.String()
	// 4000 rounds: k4's share is estimated from ~250 samples (within 0.3 at 5 standard deviations; at
	// 1000 rounds, ~60 samples, about 3% of runs missed it).
	for range 4000 {
		fc.out.Reset()
		feed(cn, fc, round)
	}
	_, keys = hotStats(t, s.appendHotKeyStatsString())
	require.Len(t, keys, 3)
	for i, k := range keys {
		assert.Equal(t, fmt.Sprint("k", i), k["key"])
	}
	hot := s.HotKeys(10)
	require.Len(t, hot, 5)
	assert.Equal(t, "k4", hot[4].Key)
	assert.InEpsilon(t, 100.0/15, hot[4].Share, 0.3)

	clock.Add(int64(time.Second)) // the next window: the keys are still listed
	_, keys = hotStats(t, s.appendHotKeyStatsString())
	assert.Len(t, keys, 3)
	clock.Add(int64(time.Second)/2 - 1) // the last nanosecond of it
	_, keys = hotStats(t, s.appendHotKeyStatsString())
	assert.Len(t, keys, 3)
	clock.Add(1) // two windows after the last request's
	_, keys = hotStats(t, s.appendHotKeyStatsString())
	assert.Empty(t, keys)
}

// TestHotKeysOff: --hot-keys 0 lists nothing, with sample rate 0, and counts nothing.
func TestHotKeysOff(t *testing.T) {
	s, _ := newHotServer(t, 0)
	cn, fc := newConn(s, nil), &fakeConn{}
	feed(cn, fc, strings.Repeat("get hot\r\n", 1000))
	out := s.appendHotKeyStatsString()
	assert.Equal(t, "STAT hotkeys_sample_rate 0\r\nSTAT hotkeys_window_seconds 2\r\nEND\r\n", out)
	assert.Nil(t, s.HotKeys(20))
	keys, rate := hotkeys.Top(s.hot.trackers, s.store.NowNano(), 20)
	assert.Empty(t, keys, "nothing was counted")
	assert.Zero(t, rate)
}

// TestHotKeysBinaryStat: binary STAT with key "hotkeys" answers the same lines, one packet each.
func TestHotKeysBinaryStat(t *testing.T) {
	s, _ := newHotServer(t, DefaultHotKeys)
	cn, fc := newConn(s, nil), &fakeConn{}
	feed(cn, fc, strings.Repeat(bpkt(bp.OpGetKQ, "hot", "", "", 0), 1600))
	fc.out.Reset()
	out, _ := feed(cn, fc, bpkt(bp.OpStat, "hotkeys", "", "", 0))
	rs := replies(t, []byte(out))
	require.Len(t, rs, 2+5+1)
	assert.Contains(t, out, "hotkeys_sample_rate16")
	assert.Contains(t, out, "hotkey:1:keyhot")
	assert.Contains(t, out, "hotkey:1:share100.00")
	assert.Zero(t, rs[len(rs)-1].BodyLen, "the empty packet ends the group")
}

// TestHotKeysServeAllocatesNothing: with detection on, sampled requests allocate nothing in steady state,
// across window rotations.
func TestHotKeysServeAllocatesNothing(t *testing.T) {
	s, clock := newHotServer(t, DefaultHotKeys)
	cn, fc := newConn(s, nil), &fakeConn{}
	var b strings.Builder
	b.WriteString("get")
	for i := range 40 {
		fmt.Fprintf(&b, " key:%d", i)
	}
	b.WriteString("\r\nset key:1 0 0 1\r\nx\r\nmg key:2 v\r\n")
	in := b.String()
	bin := bpkt(bp.OpGetKQ, "bkey", "", "", 0) + bpkt(bp.OpNoop, "", "", "", 0)
	bc, bfc := newConn(s, nil), &fakeConn{}
	serve := func() {
		clock.Add(int64(time.Second) / 50)
		fc.out.Reset()
		fc.in.WriteString(in)
		measuredServe(cn, fc)
		bfc.out.Reset()
		bfc.in.WriteString(bin)
		measuredServe(bc, bfc)
	}
	for range 200 { // every tracker has its summaries
		serve()
	}
	assert.Zero(t, testing.AllocsPerRun(500, serve))
	assert.NotEmpty(t, s.HotKeys(1))
}

// TestHotKeysResumedFetchCountsOnce: a multi-key get whose replies pass flushThreshold yields and goes on
// later from the next key (conn.resume); its keys are counted once all the same.
func TestHotKeysResumedFetchCountsOnce(t *testing.T) {
	s, _ := newHotServer(t, DefaultHotKeys)
	cn, fc := newConn(s, nil), &fakeConn{}
	value := strings.Repeat("v", 40<<10)
	feed(cn, fc, fmt.Sprintf("set big 0 0 %d noreply\r\n%s\r\n", len(value), value))
	const requests, keys = 400, 8 // 8 values of 40 KiB: past flushThreshold after the 7th
	get := "get" + strings.Repeat(" big", keys) + "\r\n"
	for range requests {
		fc.out.Reset()
		feed(cn, fc, get)
		require.Equal(t, keys*(len(value)+len("VALUE big 0 40960\r\n\r\n"))+len("END\r\n"), fc.out.Len())
	}
	hot := s.HotKeys(1)
	require.Len(t, hot, 1)
	assert.InEpsilon(t, requests*keys/1.5, hot[0].Rate, 0.3)
}

// TestHotKeysCapacity: the summaries' size follows --hot-keys (doc/design/hotkeys.md, "Memory").
func TestHotKeysCapacity(t *testing.T) {
	for top, want := range map[int]int{0: 128, 1: 128, 20: 128, 21: 128, 22: 256, 100: 1024} {
		var h hotState
		h.init(top)
		assert.Equal(t, want, h.capacity, "--hot-keys %d", top)
	}
	var h hotState
	h.init(DefaultHotKeys)
	_, tr := h.newLoop(true)
	assert.Equal(t, 71_680, tr.Bytes(), "a loop's memory at the default")
}

// A multi-key fetch that yields (its replies passed flushThreshold) is executed again from the key it
// stopped at; each key is still counted once, so its keys keep equal rates.
func TestHotKeysCountYieldedFetchOnce(t *testing.T) {
	for _, fetch := range []string{"get a b c\r\n", "lease-get a b c\r\n"} {
		t.Run(strings.TrimSpace(fetch), func(t *testing.T) {
			s, _ := newHotServer(t, 10)
			big := strings.Repeat("v", 200_000) // two of these pass flushThreshold: the fetch yields after b
			for _, k := range []string{"a", "b", "c"} {
				out, _ := feed(newConn(s, nil), &fakeConn{}, "set "+k+" 0 0 200000\r\n"+big+"\r\n")
				require.Equal(t, "STORED\r\n", out)
			}
			cn, fc := newConn(s, nil), &fakeConn{}
			cn.shared().hot = hotkeys.NewSampler(1, 1) // every key sampled: counts are exact
			for range 4 {
				fc.in.WriteString(fetch)
				require.Equal(t, ServeAgain, cn.serve(fc), "the fetch yields")
				serveWoken(cn, fc)
			}
			keys, _ := s.hotKeys(10)
			reads := map[string]float64{}
			for _, k := range keys {
				reads[k.Key] = k.Reads
			}
			require.Len(t, reads, 3, "%+v", keys)
			assert.InDelta(t, reads["a"], reads["c"], 1e-9, "%+v", keys)
			assert.InDelta(t, reads["b"], reads["c"], 1e-9, "%+v", keys)
		})
	}
}
