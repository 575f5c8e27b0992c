package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLevel(t *testing.T) {
	for _, tc := range []struct {
		v       int
		printed []slog.Level
		hidden  []slog.Level
	}{
		{0, []slog.Level{LevelNotice, slog.LevelWarn, slog.LevelError}, []slog.Level{slog.LevelInfo, slog.LevelDebug, LevelTrace}},
		{1, []slog.Level{slog.LevelInfo, LevelNotice}, []slog.Level{slog.LevelDebug, LevelTrace}},
		{2, []slog.Level{slog.LevelDebug, slog.LevelInfo}, []slog.Level{LevelTrace}},
		{3, []slog.Level{LevelTrace, slog.LevelDebug}, nil},
		{9, []slog.Level{LevelTrace}, nil},
		{-1, []slog.Level{LevelNotice}, []slog.Level{slog.LevelInfo}},
	} {
		for _, l := range tc.printed {
			assert.GreaterOrEqual(t, l, Level(tc.v), "-v%d prints %s", tc.v, LevelName(l))
		}
		for _, l := range tc.hidden {
			assert.Less(t, l, Level(tc.v), "-v%d hides %s", tc.v, LevelName(l))
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
		ok   bool
	}{{"text", Text, true}, {"json", JSON, true}, {"JSON", "", false}, {"", "", false}, {"logfmt", "", false}} {
		f, err := ParseFormat(tc.in)
		assert.Equal(t, tc.ok, err == nil, tc.in)
		assert.Equal(t, tc.want, f, tc.in)
	}
}

// textLine is the text format: prefix, time, level, message, attributes.
var textLine = regexp.MustCompile(`^leasecached: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ .*$`)

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		text string // the line after the time
		json map[string]any
	}{
		{"attributes", func(l *slog.Logger) { l.Info("connection closed", "conn", 23, "peer", "127.0.0.1:5555") },
			`INFO connection closed conn=23 peer=127.0.0.1:5555`,
			map[string]any{"level": "INFO", "msg": "connection closed", "conn": 23.0, "peer": "127.0.0.1:5555"}},
		{"no attributes", func(l *slog.Logger) { l.Warn("one: two") },
			`WARN one: two`, map[string]any{"level": "WARN", "msg": "one: two"}},
		{"notice", func(l *slog.Logger) { l.Log(t.Context(), LevelNotice, "stopping", "signal", "SIGTERM") },
			`NOTICE stopping signal=SIGTERM`, map[string]any{"level": "NOTICE", "msg": "stopping", "signal": "SIGTERM"}},
		{"trace", func(l *slog.Logger) { l.Log(t.Context(), LevelTrace, "get", "conn", 5) },
			`TRACE get conn=5`, map[string]any{"level": "TRACE", "msg": "get", "conn": 5.0}},
		{"quoted", func(l *slog.Logger) { l.Info("m", "err", "a b") }, `INFO m err="a b"`,
			map[string]any{"level": "INFO", "msg": "m", "err": "a b"}},
		{"with and group", func(l *slog.Logger) { l.With("conn", 1).WithGroup("g").Info("m", "time", 2) },
			`INFO m conn=1 g.time=2`, map[string]any{"level": "INFO", "msg": "m", "conn": 1.0, "g": map[string]any{"time": 2.0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lv slog.LevelVar
			lv.Set(LevelTrace)
			var text, js bytes.Buffer
			tc.log(New(&text, Text, &lv))
			tc.log(New(&js, JSON, &lv))

			line := strings.TrimSuffix(text.String(), "\n")
			require.NotContains(t, line, "\n", "one line")
			assert.Regexp(t, textLine, line)
			assert.Equal(t, tc.text, line[len(Prefix+textTime)+1:])

			var got map[string]any
			require.NoError(t, json.Unmarshal(js.Bytes(), &got), js.String())
			assert.Contains(t, got, "time")
			delete(got, "time")
			assert.Equal(t, tc.json, got)
		})
	}
}

// The level variable is read per record: memcached's `verbosity N` changes what is printed at once.
func TestLevelVarChanges(t *testing.T) {
	for _, f := range []Format{Text, JSON} {
		var lv slog.LevelVar
		lv.Set(Level(0))
		var out bytes.Buffer
		l := New(&out, f, &lv)
		l.Info("hidden")
		lv.Set(Level(1))
		l.Info("shown")
		assert.NotContains(t, out.String(), "hidden", f)
		assert.Contains(t, out.String(), "shown", f)
	}
}

// Records logged at once from many goroutines come out as whole lines.
func TestTextConcurrent(t *testing.T) {
	var lv slog.LevelVar
	var out bytes.Buffer
	l := New(&out, Text, &lv)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				l.Warn("line", "g", g, "i", i, "pad", strings.Repeat("x", 100))
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 800)
	for _, line := range lines {
		assert.Regexp(t, `^leasecached: .* WARN line g=\d i=\d+ pad=x{100}$`, line)
	}
}
