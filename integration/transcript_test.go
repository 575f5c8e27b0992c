package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A script template is protocol text with placeholders, expanded per run so
// that every (case, mode, server) run uses its own keys and its own server's
// CAS uniques:
//
//	$k       the run's unique key prefix (keyPrefixLen bytes)
//	$cas     the CAS unique of the last VALUE line this server returned
//	$future  an absolute unix time one hour from now (> 30 days: absolute)
//	$past    an absolute unix time one hour ago
const (
	phPrefix = "$k"
	phCAS    = "$cas"
	phFuture = "$future"
	phPast   = "$past"
)

// keyPrefixLen is the length of the expanded $k, so that cases can build keys
// of an exact length (see keyOfLen).
const keyPrefixLen = 6

// absoluteTimeOffset is how far $future and $past lie from now.
const absoluteTimeOffset = time.Hour

// Markers appended to a transcript for connection events, so that they are
// compared like bytes.
const (
	markClosed  = "<closed>"
	markTimeout = "<timeout>"
)

// keyOfLen returns a key template that expands to exactly n bytes.
func keyOfLen(n int) string {
	return phPrefix + strings.Repeat("x", n-keyPrefixLen)
}

// runPrefix is the $k of one run: case index and mode, fixed width.
func runPrefix(caseIdx int, mode sendMode) string {
	p := fmt.Sprintf("c%03d%c_", caseIdx, mode.String()[0])
	if len(p) != keyPrefixLen {
		panic(fmt.Sprintf("key prefix %q is not %d bytes", p, keyPrefixLen))
	}
	return p
}

// expand fills the placeholders of one step.
func expand(tmpl, prefix, cas string, now time.Time) string {
	return strings.NewReplacer(
		phCAS, cas,
		phFuture, strconv.FormatInt(now.Add(absoluteTimeOffset).Unix(), 10),
		phPast, strconv.FormatInt(now.Add(-absoluteTimeOffset).Unix(), 10),
		phPrefix, prefix,
	).Replace(tmpl)
}

// scriptRun describes how to send one case.
type scriptRun struct {
	steps      []string
	mode       sendMode
	prefix     string
	chunk      int           // > 0: non-whole modes send pieces of this size
	noSentinel bool          // do not append the sentinel; read to EOF/timeout
	halfClose  bool          // send FIN after the script (implies noSentinel)
	timeout    time.Duration // per step
}

// sleepStep is a step that sends nothing and pauses, for timing cases:
// "#sleep 1500ms".
const sleepStep = "#sleep "

// runScript sends each step (followed by the sentinel unless noSentinel) on
// one connection and returns the transcript: all replies, sentinel replies
// removed, with markers for a closed connection or a timeout. Steps after a
// close or timeout are not sent. It never calls t.Fatal, so that both daemons
// can be driven concurrently; a failure to connect shows in the transcript.
func runScript(d *daemon, sr scriptRun) []byte {
	rc, err := dialRawErr(d)
	if err != nil {
		return []byte("<" + err.Error() + ">")
	}
	defer rc.c.Close()
	rc.fixedChunk = sr.chunk
	rc.halfClose = sr.halfClose
	timeout := sr.timeout
	if timeout == 0 {
		timeout = defaultReplyTimeout
	}
	now := time.Now()
	var transcript []byte
	cas := "0"
	for _, step := range sr.steps {
		if pause, ok := strings.CutPrefix(step, sleepStep); ok {
			dur, err := time.ParseDuration(pause)
			if err != nil {
				return append(transcript, "<bad sleep step "+pause+">"...)
			}
			time.Sleep(dur)
			continue
		}
		script := []byte(expand(step, sr.prefix, cas, now))
		sentinel := sentinelReply
		if sr.noSentinel || sr.halfClose {
			sentinel = nil
		} else {
			script = append(script, sentinelCmd...)
		}
		rep := rc.exchange(script, sr.mode, sentinel, timeout)
		transcript = append(transcript, bytes.TrimSuffix(rep.data, sentinelReply)...)
		if c := lastCAS(rep.data); c != "" {
			cas = c
		}
		if rep.closed {
			return append(transcript, markClosed...)
		}
		if rep.timedOut {
			return append(transcript, markTimeout...)
		}
	}
	return transcript
}

// runBoth runs the same script on both daemons concurrently (timing cases
// then cost their pauses once) and returns the normalized transcripts.
func runBoth(mc, lc *daemon, sr scriptRun) (want, got string) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		want = normalize(runScript(mc, sr), sr.prefix)
	}()
	got = normalize(runScript(lc, sr), sr.prefix)
	wg.Wait()
	return want, got
}

// walkReply calls fn for each protocol line of a reply (without its "\n"),
// skipping the data blocks announced by VALUE lines so that stored bytes are
// never mistaken for protocol lines. fn returns the replacement line.
func walkReply(b []byte, fn func(line []byte) []byte) []byte {
	var out []byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(out, fn(b)...)
		}
		line := b[:i]
		out = append(out, fn(line)...)
		out = append(out, '\n')
		b = b[i+1:]
		f := bytes.Fields(line)
		if len(f) >= 4 && string(f[0]) == "VALUE" {
			n, err := strconv.Atoi(string(f[3]))
			if err == nil && n >= 0 && n+2 <= len(b) {
				out = append(out, b[:n+2]...)
				b = b[n+2:]
			}
		}
	}
	return out
}

// lastCAS returns the CAS unique of the last gets/gats VALUE line in b.
func lastCAS(b []byte) string {
	cas := ""
	walkReply(b, func(line []byte) []byte {
		f := bytes.Fields(line)
		if len(f) == 5 && string(f[0]) == "VALUE" {
			cas = string(f[4])
		}
		return line
	})
	return cas
}

// normalize blanks out ONLY what legitimately differs between two servers:
// CAS uniques in VALUE lines, the VERSION string and STAT values; and it
// replaces the run's key prefix with $k so that runs in different modes
// compare.
func normalize(b []byte, prefix string) string {
	out := walkReply(b, func(line []byte) []byte {
		f := bytes.Split(line, []byte(" "))
		switch {
		case len(f) == 5 && string(f[0]) == "VALUE":
			return []byte(fmt.Sprintf("VALUE %s %s %s <cas>%s", f[1], f[2], f[3], crOf(line)))
		case bytes.HasPrefix(line, []byte("VERSION ")):
			return []byte("VERSION <version>" + crOf(line))
		case len(f) >= 3 && string(f[0]) == "STAT":
			return []byte(fmt.Sprintf("STAT %s <value>%s", f[1], crOf(line)))
		}
		return line
	})
	if prefix != "" {
		out = bytes.ReplaceAll(out, []byte(prefix), []byte(phPrefix))
	}
	return string(out)
}

// crOf keeps a line's "\r" so that a server ending lines with a bare "\n"
// still shows as a difference.
func crOf(line []byte) string {
	if bytes.HasSuffix(line, []byte("\r")) {
		return "\r"
	}
	return ""
}

// describeDiff renders two normalized transcripts and their first differing
// line, truncated so that megabyte values stay readable.
func describeDiff(want, got string) string {
	wl := strings.SplitAfter(want, "\n")
	gl := strings.SplitAfter(got, "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	line := func(ls []string) string {
		if i < len(ls) {
			return truncate([]byte(ls[i]), 200)
		}
		return "<end of transcript>"
	}
	return fmt.Sprintf("first difference at reply line %d:\n  memcached:   %q\n  leasecached: %q\nfull memcached:   %q\nfull leasecached: %q",
		i+1, line(wl), line(gl), truncate([]byte(want), 1500), truncate([]byte(got), 1500))
}
