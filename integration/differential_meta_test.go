package integration

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Differential tests of memcached 1.6's meta commands (mg, ms, md, ma, mn, me): every flag, mode
// and error, compared byte for byte with memcached after normalizing only what legitimately differs
// between two servers (see normalizeMeta).
//
// Scripts use the placeholders of transcript_test.go plus $b64{x}: the base64 encoding of the
// expanded key "$kx", so that binary-key cases get per-run keys like every other case.

// opaqueTooLong is an O token one byte over memcached's 32-byte limit.
var opaqueTooLong = "O" + strings.Repeat("o", 32)

// TestDifferentialMeta compares memcached and leasecached on the meta commands, each script sent
// whole, byte by byte and in random chunks.
func TestDifferentialMeta(t *testing.T) {
	mc, lc := startPair(t, "-I", diffItemMax)
	runMetaDifferential(t, mc, lc, metaCases())
}

// metaCases are the scripts. The multi-megabyte ones are sent whole only: split sends of big data
// blocks are the framing tests' business, and here they would only load the machine.
func metaCases() []diffCase {
	return []diffCase{
		// --- mg -----------------------------------------------------------
		{name: "mg miss", steps: one("mg $ka\r\nmg $ka v\r\nmg $ka v k O123 s t c f\r\nmg $ka k Oq q\r\nmg $ka q\r\nmg $ka q v k\r\n")},
		{name: "mg hit every return flag", steps: one("ms $ka 3 F7 T100\r\nabc\r\nmg $ka\r\nmg $ka v\r\nmg $ka s v f t k Oxy h l\r\n" +
			"mg $ka O1 k f s\r\nmg $ka k q\r\nmg $ka v q\r\n")},
		{name: "mg cas matches gets", steps: one("set $ka 0 0 1\r\nx\r\ngets $ka\r\nmg $ka c v\r\n")},
		{name: "mg flags zero and max", steps: one("set $ka 0 0 1\r\na\r\nset $kb 4294967295 0 1\r\nb\r\nmg $ka f\r\nmg $kb f v\r\n")},
		// Only relative TTLs are compared: memcached's clock lags the wall clock by up to two seconds (it
		// ticks once a second, from its own start), so an absolute exptime's t is not comparable.
		{name: "mg no ttl", steps: one("set $ka 0 0 1\r\na\r\nmg $ka t\r\nset $kb 0 $future 1\r\nb\r\nmg $kb v\r\n")},
		{name: "mg hit and fetched", steps: one("ms $ka 1\r\na\r\nmg $ka h\r\nmg $ka h l\r\nms $kb 1\r\nb\r\nmg $kb u\r\nmg $kb h\r\nmg $kb u h\r\nmg $kb h\r\n" +
			"ms $kc 1\r\nc\r\nmg $kc v\r\nmg $kc h\r\nms $kd 1\r\nd\r\nmg $kd u v\r\nmg $kd h\r\n")},
		{name: "mg T touches", steps: one("ms $ka 1\r\na\r\nmg $ka T100 t\r\nmg $ka t T50\r\nmg $ka t\r\nmg $ka T0 t\r\nmg $kb T100 t\r\n" +
			"mg $ka T-1\r\nmg $ka\r\nms $kc 1 T100\r\nc\r\nmg $kc T$future\r\nmg $kc\r\nmg $kc T$past\r\nmg $kc\r\n")},
		{name: "mg N vivify W Z", steps: one("mg $ka N30 v t c f s\r\nmg $ka N30 v t\r\nmg $ka v t\r\nmg $ka\r\n" +
			"mg $kb N0 t\r\nmg $kb t\r\nmg $kc t N30\r\nmg $kc t\r\nmg $kd q N30\r\nmg $kd q k\r\n")},
		{name: "mg N T order", steps: one("mg $ka T10 N5 t\r\nmg $kb N5 T10 t\r\nmg $kc t T10 N5 t\r\nmg $kb t\r\n")},
		{name: "mg vivify then set clears token", steps: one("mg $ka N30\r\nmg $ka N30\r\nms $ka 1\r\nx\r\nmg $ka N30 v\r\n")},
		{name: "mg R recache", steps: one("ms $ka 1 T10\r\na\r\nmg $ka R30 t\r\nmg $ka R30 t\r\nmg $ka R5 t\r\n" +
			"ms $kb 1\r\nb\r\nmg $kb R30\r\nms $kc 1 T100\r\nc\r\nmg $kc R30\r\nmg $kc R1000\r\nmg $kc R1000\r\n" +
			"mg $kd N30 R60\r\nmg $kd R60\r\nms $ke 1 T20\r\ne\r\nmg $ke T5 R10\r\nmg $ke R30 T5\r\n")},
		// R10 on a T10 item is the boundary (a token only below 10 s left): a clock tick between the ms and
		// the mg moves it, on either server, so the case runs again when its replies differ (clockEdge).
		{name: "mg R boundary", clockEdge: true, steps: one("ms $ka 1 T10\r\na\r\nmg $ka R10\r\nmg $ka R-1\r\nmg $ka R0\r\n")},
		{name: "mg unknown and repeated flags", steps: one("ms $ka 1\r\na\r\nmg $ka E5\r\nmg $ka x\r\nmg $ka v v\r\nmg $ka Z\r\nmg $ka \xff\r\n" +
			"mg $ka Tx\r\nmg $ka T\r\nmg $ka N\r\nmg $ka Rx\r\nmg $ka Fx\r\nmg $ka Cx\r\nmg $ka MXX\r\nmg $ka Jx\r\nmg $ka Dx\r\n" +
			"mg $ka Fx Tx\r\nmg $ka Tx Fx\r\nmg $ka Tx Jx\r\nmg $ka Tx ZZ\r\nmg $ka Tx v v\r\nmg $ka q Tx\r\nmg $ka F5 C7 M1 J1 D1 I P L\r\n")},
		{name: "mg opaque limit", steps: one("ms $ka 1\r\na\r\nmg $ka O" + strings.Repeat("o", 31) + "\r\nmg $ka " + opaqueTooLong + "\r\n" +
			"mg $kb " + opaqueTooLong + "\r\nmg $kb q " + opaqueTooLong + "\r\n")},
		{name: "mg opaque too long after effects", steps: one("mg $ka N30 " + opaqueTooLong + "\r\nmg $ka v t\r\n" +
			"ms $kb 1\r\nb\r\nmg $kb T100 " + opaqueTooLong + " h\r\nmg $kb t h\r\nmg $kb " + opaqueTooLong + " T200\r\nmg $kb t\r\n" +
			"ms $kc 1\r\nc\r\nmg $kc v " + opaqueTooLong + "\r\nmg $kc h\r\n")},
		{name: "mg flag count limit", steps: one("ms $ka 1\r\na\r\nmg $ka s t c f h l k O1 P L u v q b2 F1 C1 I\r\nmg $ka s t c f h l k O1 P L u v F1 C1 I J1\r\n" +
			"mg $ka s t c f h l k O1 P L u v F1 C1 I J1 D1 R1\r\n")},
		{name: "mg key limits", steps: one("mg " + keyOfLen(250) + " v\r\nmg " + keyOfLen(251) + " v\r\nmg\r\nmg \r\n")},
		{name: "mg chunked value", chunk: bigChunk, wholeOnly: true, steps: one("ms $ka 600000 F3\r\n" + strings.Repeat("v", 600000) + "\r\nmg $ka s f t\r\nmg $ka v\r\n")},

		// --- base64 keys ------------------------------------------------------
		{name: "b key ms mg md", steps: one("ms $b64{a} 2 b k c\r\nhi\r\nmg $b64{a} b k v s\r\nmg $b64{a} b\r\nmg $ka k v\r\n" +
			"me $b64{a} b\r\nme $ka\r\nmd $b64{a} b k q\r\nmd $b64{a} b k\r\nmg $b64{a} b k v O9\r\nmg $b64{a} b k q\r\n")},
		{name: "b key on plain item", steps: one("set $ka 0 0 1\r\nx\r\nmg $b64{a} b k v\r\nme $b64{a} b\r\nma $b64{b} b N0 J1 k v\r\nmg $b64{b} b k v\r\n" +
			"ms $b64{c} 1 b\r\nc\r\nms $b64{c} 1 b MA k\r\nd\r\nmg $b64{c} b k v\r\n")},
		{name: "b key decoding errors", steps: one("mg a b\r\nmg ab== b\r\nmg a=== b\r\nmg ==== b\r\nmg AA== b\r\nmg A!A=A b k\r\n" +
			"ms a 1 b\r\nx\r\nmd a b\r\nma a b\r\nme a b\r\nme $ka b b\r\nmg $ka b b\r\n")},

		// --- ms -----------------------------------------------------------
		{name: "ms basic and return flags", steps: one("ms $ka 3\r\nabc\r\nmg $ka v f t\r\nms $ka 2 T100 F5 k Oab c\r\nxy\r\nmg $ka v f t\r\n" +
			"ms $ka 0\r\n\r\nmg $ka v\r\nms $ka 1 f t v h l u s P L Ox\r\nq\r\nmg $ka v\r\n")},
		{name: "ms quiet", steps: one("ms $ka 1 q\r\na\r\nms $ka 1 q ME\r\nb\r\nms $ka 1 q MS k\r\nc\r\nms $kb 1 q MR\r\nd\r\nms $ka 1 q C99999999999\r\ne\r\nmg $ka v\r\n")},
		{name: "ms modes", steps: one("ms $ka 1 MA\r\na\r\nms $ka 1 MP\r\na\r\nms $ka 1 MR\r\na\r\nms $ka 1 ME c\r\na\r\nms $ka 1 ME c k\r\nb\r\n" +
			"ms $ka 1 MA T99 F5\r\nc\r\nms $ka 1 MP\r\nz\r\nmg $ka v t f\r\nms $ka 1 MR F9\r\nr\r\nmg $ka v f\r\nms $ka 1 MS\r\ns\r\nmg $ka v f\r\n")},
		{name: "ms mode errors", steps: one("ms $ka 1 Mr\r\nx\r\nms $ka 1 MX\r\nx\r\nms $ka 1 M\r\nx\r\nms $ka 1 MSS\r\nx\r\nms $ka 1 S1\r\nx\r\nmg $ka\r\n")},
		{name: "ms cas per mode", steps: []string{
			"ms $ka 1\r\na\r\ngets $ka\r\n",
			"ms $ka 1 C$cas c\r\nb\r\nms $ka 1 C$cas\r\nc\r\nms $kz 1 C99999999999\r\nz\r\nms $kz 1 MR C99999999999\r\nz\r\nms $kz 1 MA C99999999999\r\nz\r\nms $kz 1 ME C99999999999\r\nz\r\n" +
				"ms $ka 1 MA C99999999999\r\nd\r\nms $ka 1 MP C99999999999\r\nd\r\nms $ka 1 MR C99999999999\r\nd\r\nms $ka 1 ME C99999999999\r\nd\r\nms $ka 1 C0\r\nd\r\nms $ka 1 MA C0\r\nd\r\n" +
				"gets $ka\r\n",
			"ms $ka 1 MA C$cas\r\ne\r\ngets $ka\r\n",
			"ms $ka 1 MR C$cas\r\nf\r\nmg $ka v\r\n",
		}},
		{name: "ms invalidate stale cas", steps: []string{
			"ms $ka 3 T100\r\nabc\r\nmd $ka I T30\r\ngets $ka\r\n",
			"ms $ka 3 C99999999999 I\r\nxyz\r\nmg $ka v t\r\nms $ka 3 C99999999999 I\r\nbad\r\nmg $ka v\r\nmd $ka I q\r\nmg $ka v t\r\nms $ka 3 I\r\nnew\r\nmg $ka v t\r\n" +
				"ms $kb 1\r\nb\r\nmg $kb\r\nms $kb 1 C99999999999 I\r\nc\r\nmg $kb v\r\n",
		}},
		{name: "ms exptime", steps: one("ms $ka 1 T-1\r\na\r\nmg $ka v\r\nms $kb 1 T$past\r\nb\r\nmg $kb v\r\nms $kc 1 T$future\r\nc\r\nmg $kc v\r\nms $kd 1 T0\r\nd\r\nmg $kd t\r\n")},
		{name: "ms flags values", steps: one("ms $ka 1 F4294967295\r\na\r\nmg $ka f\r\nms $ka 1 F4294967296\r\na\r\nmg $ka f\r\nms $ka 1 F-1\r\na\r\nmg $ka f\r\n" +
			"ms $ka 1 Fx\r\na\r\nms $ka 1 F\r\na\r\nmg $ka f\r\n")},
		{name: "ms errors swallow data", steps: one("ms $ka 2 Z\r\nab\r\nms $ka 2 T T\r\nab\r\nms $ka 2 Tx\r\nab\r\nms $ka 2 b\r\nab\r\nms $ka 2 Cx\r\nab\r\n" +
			"ms $ka 2 J5x\r\nab\r\nms $ka 2 D-1\r\nab\r\nms $ka 2 " + opaqueTooLong + "\r\nab\r\nms $ka 2 MX " + opaqueTooLong + "\r\nab\r\nmg $ka\r\n")},
		{name: "ms line errors keep data", steps: one("ms\r\nms $ka\r\nms $ka x\r\nab\r\nms $ka -1\r\nms " + keyOfLen(251) + " 2\r\nab\r\n")},
		{name: "ms bad data chunk", steps: one("ms $ka 2\r\nabcd\r\nms $ka 2 q\r\nabcd\r\nmg $ka v\r\n")},
		{name: "ms too large drops old value", chunk: bigChunk, wholeOnly: true, steps: one("ms $ka 1\r\na\r\nms $ka " + strconv.Itoa(overItemMax) + " q\r\n" +
			strings.Repeat("x", overItemMax) + "\r\nmg $ka v\r\nms $kb 1\r\nb\r\nms $kb " + strconv.Itoa(overItemMax) + " ME\r\n" +
			strings.Repeat("x", overItemMax) + "\r\nmg $kb v\r\n")},
		// A base64 key (b): the key as stored is the one whose old value goes.
		{name: "ms b too large drops old value", chunk: bigChunk, wholeOnly: true, steps: one("set b64drop 0 0 1\r\nx\r\n" +
			"ms YjY0ZHJvcA== " + strconv.Itoa(overItemMax) + " b\r\n" + strings.Repeat("x", overItemMax) + "\r\nget b64drop\r\n")},
		{name: "ms append too large", chunk: bigChunk, wholeOnly: true, steps: one("ms $ka 1048576\r\n" + strings.Repeat("a", mebibyte) + "\r\n" +
			"ms $ka 1048576 MA\r\n" + strings.Repeat("b", mebibyte) + "\r\nmg $ka s\r\n")},

		// --- md -----------------------------------------------------------
		{name: "md basic", steps: one("ms $ka 1\r\na\r\nmd $ka\r\nmd $ka\r\nmg $ka\r\nms $ka 1\r\na\r\nmd $ka q\r\nmd $ka q\r\nmd $ka k Ox q\r\nmg $ka\r\n")},
		{name: "md cas", steps: []string{
			"ms $ka 1\r\na\r\ngets $ka\r\n",
			"md $ka C99999999999\r\nmd $ka C0\r\nmd $ka C99999999999 q\r\nmd $ka C$cas k O5\r\nmd $ka C$cas\r\nmd $kz C99999999999\r\n",
		}},
		{name: "md invalidate", steps: one("ms $ka 3 T100\r\nabc\r\nmd $ka I T30\r\nmg $ka v t\r\nmg $ka v t\r\nmg $ka\r\nmd $ka I\r\nmg $ka t\r\n" +
			"md $ka I T-1\r\nmg $ka\r\nmd $kb I\r\nms $kc 1\r\nc\r\nmd $kc I q\r\nmg $kc N30 R30\r\nmd $kc\r\nmg $kc\r\n")},
		{name: "md errors", steps: one("ms $ka 1\r\na\r\nmd $ka Tx\r\nmd $ka Z\r\nmd $ka q q\r\nmd $ka C\r\nmd $ka b\r\nmd $ka " + opaqueTooLong + "\r\nmg $ka\r\n" +
			"md\r\nmd " + keyOfLen(251) + "\r\nmd $ka v s t c f h l u P L F1 N1 R1 J1 D1 MD\r\n")},
		{name: "md flag count limit", steps: one("md $ka s t c f h l k O1 P L u v F1 C1 I J1 D1\r\nmd $ka s t c f h l k O1 P L u v F1 C1 I J1 D1 N1\r\n")},

		// --- ma -----------------------------------------------------------
		{name: "ma basic", steps: one("ms $ka 2\r\n10\r\nma $ka\r\nmg $ka v\r\nma $ka v\r\nma $ka MD v\r\nma $ka M- D100 v\r\nma $ka M+ D7 v\r\nma $ka MI v\r\n" +
			"ma $ka D18446744073709551615 v\r\nma $kz\r\nma $kz MD\r\nma $kz v k Oz\r\n")},
		{name: "ma return flags", steps: one("ms $ka 1 T100\r\n5\r\nma $ka t c v k O7\r\nma $ka T30 t\r\nma $ka t T50 t\r\n")},
		{name: "ma grows value", steps: one("ms $ka 1\r\n9\r\nma $ka T100 t v\r\nmg $ka t v\r\nms $kb 2\r\n10\r\nma $kb MD D1 v\r\nmg $kb v s\r\n")},
		{name: "ma vivify", steps: one("ma $ka N0 v\r\nma $kb N100 J42 t c k O7 v\r\nmg $kb v t\r\nma $kc J5\r\nma $kd N0 J5 D100 MD T30 t v\r\n" +
			"ma $ke t N30 v\r\nma $kf q v N0\r\nma $kf q v N0\r\nmg $kf v\r\n")},
		{name: "ma cas", steps: []string{
			"ms $ka 1\r\n1\r\ngets $ka\r\n",
			"ma $ka C99999999999 v\r\nma $ka C0 v\r\nma $ka C99999999999 q O5 k\r\nma $kz C99999999999\r\ngets $ka\r\n",
			"ma $ka C$cas v c\r\n",
		}},
		{name: "ma quiet", steps: one("ms $ka 1\r\n1\r\nma $ka q\r\nma $ka q v\r\nma $kz q\r\nma $kz q N0\r\nms $kb 1\r\nx\r\nma $kb q\r\nmg $ka v\r\n")},
		{name: "ma non-numeric", steps: one("ms $ka 2\r\nab\r\nma $ka\r\nma $ka q\r\nms $kb 0\r\n\r\nma $kb\r\nms $kc 21\r\n184467440737095516150\r\nma $kc\r\n" +
			"ms $kd 3\r\n 12\r\nma $kd v\r\nms $ke 3\r\n-12\r\nma $ke\r\n")},
		{name: "ma errors", steps: one("ms $ka 1\r\n5\r\nma $ka Mx\r\nma $ka MII\r\nma $ka D-1\r\nma $ka Dx\r\nma $ka J\r\nma $ka Tx\r\nma $ka Z\r\nma $ka b\r\n" +
			"ma $ka " + opaqueTooLong + "\r\nmg $ka v\r\nma $kb N0 " + opaqueTooLong + "\r\nmg $kb v\r\nma\r\nma " + keyOfLen(251) + "\r\n")},

		// --- me, mn -------------------------------------------------------
		{name: "me", steps: one("ms $ka 3 T100\r\nabc\r\nme $ka\r\nmg $ka\r\nme $ka\r\nms $kb 1 F1\r\nb\r\nme $kb\r\nme $kz\r\nme $ka x y\r\nme\r\nme " + keyOfLen(251) + "\r\n")},
		{name: "me sizes and classes", chunk: bigChunk, wholeOnly: true, steps: one("ms $ka 1000\r\n" + strings.Repeat("a", 1000) + "\r\nme $ka\r\n" +
			"ms $kb 200000\r\n" + strings.Repeat("b", 200000) + "\r\nme $kb\r\nms $kc 600000\r\n" + strings.Repeat("c", 600000) + "\r\nme $kc\r\n" +
			"ms $kd 60\r\n" + strings.Repeat("d", 60) + "\r\nme $kd\r\n")},
		// Every step ends with the runner's sentinel, mn: quiet replies must leave nothing before its MN.
		{name: "mn after quiet", steps: []string{"mg $ka q v\r\n", "ms $ka 1 q\r\na\r\n", "mg $ka q v k\r\nmd $kb q\r\n"}},
		{name: "meta commands on classic items", steps: one("set $ka 5 0 2\r\n12\r\nmg $ka v f\r\nma $ka v\r\nget $ka\r\nappend $ka 0 0 1\r\n3\r\nmg $ka v\r\n" +
			"md $ka I\r\nget $ka\r\nmg $ka v\r\n")},
	}
}

// runMetaDifferential is runDifferential for meta scripts: it expands $b64{x} before running and
// normalizes with normalizeMeta.
func runMetaDifferential(t *testing.T, mc, lc *daemon, cases []diffCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			tries := 1
			if c.clockEdge {
				tries = clockEdgeTries
			}
			var errs []string
			for try := range tries {
				if errs = runMetaCase(t, mc, lc, c, i+try*clockEdgeStride); len(errs) == 0 {
					return
				}
			}
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}

// clockEdgeTries is how many times a clockEdge case runs before its differences count: a run straddles one
// of memcached's clock ticks rarely, three in a row never in practice. clockEdgeStride keeps each try's keys
// apart (runPrefix: case numbers of three digits).
const (
	clockEdgeTries  = 3
	clockEdgeStride = 300
)

// runMetaCase runs case c (keys numbered n) in each of its send modes and returns the differences found.
func runMetaCase(t *testing.T, mc, lc *daemon, c diffCase, n int) []string {
	modes := allModes
	if c.wholeOnly {
		modes = []sendMode{wholeWrite}
	}
	var errs []string
	var oracleWhole string
	for _, mode := range modes {
		prefix := runPrefix(n, mode)
		steps, encoded := expandBase64Keys(c.steps, prefix)
		sr := scriptRun{steps: steps, mode: mode, prefix: prefix,
			chunk: c.chunk, noSentinel: c.noSentinel, halfClose: c.halfClose, timeout: c.timeout}
		want, got := runBoth(mc, lc, sr)
		want, got = normalizeMeta(want, encoded), normalizeMeta(got, encoded)
		if mode == wholeWrite {
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached transcript: %q", truncate([]byte(want), 3000))
			}
			oracleWhole = want
		} else if !sameModuloClock(want, oracleWhole) {
			errs = append(errs, fmt.Sprintf("test bug: memcached answers differently when the script is sent %s; mark the case wholeOnly\n%s",
				mode, describeDiff(oracleWhole, want)))
		}
		if !sameModuloClock(want, got) {
			errs = append(errs, fmt.Sprintf("sent %s: leasecached differs from memcached\n%s", mode, describeDiff(want, got)))
		}
	}
	return errs
}

// base64Placeholder matches $b64{x}.
var base64Placeholder = regexp.MustCompile(`\$b64\{([^}]*)\}`)

// expandBase64Keys replaces $b64{x} with the base64 encoding of prefix+x, and returns the expanded
// steps and a map from each encoding back to its placeholder (for normalizeMeta).
func expandBase64Keys(steps []string, prefix string) ([]string, map[string]string) {
	encoded := map[string]string{}
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = base64Placeholder.ReplaceAllStringFunc(s, func(m string) string {
			enc := base64.StdEncoding.EncodeToString([]byte(prefix + base64Placeholder.FindStringSubmatch(m)[1]))
			encoded[enc] = m
			return enc
		})
	}
	return out, encoded
}

// metaCasToken matches a meta reply's CAS flag (" c123") and me's "cas=123".
var (
	metaCasToken = regexp.MustCompile(` c[0-9]+\b`)
	meCasField   = regexp.MustCompile(`\bcas=[0-9]+\b`)
)

// normalizeMeta blanks what legitimately differs between two servers in a meta transcript already
// passed through normalize: CAS uniques (the daemons serve other cases concurrently, so their
// counters differ) in meta status lines and me lines; and it maps base64 keys back to their
// placeholders. VA data blocks are skipped, never rewritten.
func normalizeMeta(s string, encoded map[string]string) string {
	for enc, ph := range encoded {
		s = strings.ReplaceAll(s, enc, ph)
	}
	var out strings.Builder
	b := []byte(s)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out.Write(b)
			break
		}
		line := b[:i+1]
		b = b[i+1:]
		f := bytes.Fields(line)
		isStatus := len(f) > 0 && len(f[0]) == 2 && bytes.Contains([]byte(" HD VA EN NF NS EX "), append(append([]byte(" "), f[0]...), ' '))
		switch {
		case isStatus:
			out.Write(metaCasToken.ReplaceAll(line, []byte(" c<cas>")))
		case len(f) > 0 && string(f[0]) == "ME":
			out.Write(meCasField.ReplaceAll(line, []byte("cas=<cas>")))
		default:
			out.Write(line)
		}
		if len(f) >= 2 && string(f[0]) == "VA" {
			if n, err := strconv.Atoi(string(f[1])); err == nil && n >= 0 && n+2 <= len(b) {
				out.Write(b[:n+2])
				b = b[n+2:]
			}
		}
	}
	return out.String()
}

// clockToken matches the numbers that depend on when each server's clock ticks: t (TTL), l (idle),
// and me's exp= and la=.
var clockToken = regexp.MustCompile(`( t| l|exp=|la=)(-?[0-9]+)\b`)

// sameModuloClock reports whether two transcripts are equal, allowing TTL and idle numbers to differ
// by one: memcached's clock ticks on its own schedule, so a case that straddles a tick may see one
// second more or less than our wall clock. Everything else must match byte for byte.
func sameModuloClock(a, b string) bool { return sameWithinClock(a, b, 1) }

// sameWithinClock is sameModuloClock with slack seconds of difference allowed; -1 ("never expires":
// t-1, exp=-1) must match exactly whatever the slack.
func sameWithinClock(a, b string, slack int64) bool {
	if a == b {
		return true
	}
	blank := func(s string) string { return clockToken.ReplaceAllString(s, "${1}<n>") }
	if blank(a) != blank(b) {
		return false
	}
	na, nb := clockToken.FindAllStringSubmatch(a, -1), clockToken.FindAllStringSubmatch(b, -1)
	for i := range na {
		x, _ := strconv.ParseInt(na[i][2], 10, 64)
		y, _ := strconv.ParseInt(nb[i][2], 10, 64)
		if x == y {
			continue
		}
		if x == -1 || y == -1 || x-y > slack || y-x > slack {
			return false
		}
	}
	return true
}

// metaStatNames are the counters memcached moves for meta commands.
var metaStatNames = []string{"cmd_get", "cmd_set", "cmd_touch", "cmd_meta", "get_hits", "get_misses",
	"delete_misses", "delete_hits", "incr_misses", "incr_hits", "decr_misses", "decr_hits",
	"cas_misses", "cas_hits", "cas_badval", "touch_hits", "touch_misses", "curr_items"}

// TestMetaStatsCounters runs one meta script on a fresh pair and compares the counters memcached
// moves for meta commands (the differential tests blank STAT values).
func TestMetaStatsCounters(t *testing.T) {
	mc, lc := startPair(t)
	script := "mg a v\r\nmg a v T10\r\nms a 1\r\n1\r\nmg a v\r\nmg a T10\r\nmg b N10\r\nma a\r\nma a MD\r\nma zz\r\nma zz MD\r\n" +
		"ma zz N0\r\nmd a\r\nmd a\r\nmd b I\r\nms c 1 C5\r\n1\r\nms a 1 C5\r\n1\r\nms zz 1 MA\r\n1\r\nme zz\r\nme zz2\r\n" +
		"md zz C6\r\nmg zzz N0 T0\r\nmg zzz N0 T0\r\nms zz 1 C1\r\n1\r\nms zz 1 C1 I\r\n2\r\nmg q1 q\r\nmd q2 q\r\nma q3 q\r\n"
	counters := func(d *daemon) map[string]string {
		rc := dialRaw(t, d)
		rc.exchange([]byte(script+"mn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
		rep := rc.exchange([]byte("stats\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
		m := map[string]string{}
		for _, line := range strings.Split(string(rep.data), "\r\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "STAT" {
				m[f[1]] = f[2]
			}
		}
		return m
	}
	want, got := counters(mc), counters(lc)
	for _, name := range metaStatNames {
		if want[name] != got[name] {
			t.Errorf("stat %s: memcached %q, leasecached %q", name, want[name], got[name])
		}
	}
}

// TestMetaNormalizer checks the normalizer itself: CAS blanked only in meta lines, VA data kept,
// clock tolerance of one second and no more.
func TestMetaNormalizer(t *testing.T) {
	in := "HD c12 kx\r\nVA 4 c9 t30\r\nc123\r\nME k exp=-1 la=0 cas=77 fetch=no cls=1 size=60\r\nEN c1\r\n"
	want := "HD c<cas> kx\r\nVA 4 c<cas> t30\r\nc123\r\nME k exp=-1 la=0 cas=<cas> fetch=no cls=1 size=60\r\nEN c<cas>\r\n"
	if got := normalizeMeta(in, nil); got != want {
		t.Errorf("normalizeMeta:\n got %q\nwant %q", got, want)
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"HD t30\r\n", "HD t29\r\n", true},
		{"HD t30\r\n", "HD t28\r\n", false},
		{"ME k exp=-3 la=1\r\n", "ME k exp=-2 la=0\r\n", true},
		{"HD t30\r\n", "HD t30 W\r\n", false},
	} {
		if got := sameModuloClock(c.a, c.b); got != c.same {
			t.Errorf("sameModuloClock(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
	steps, enc := expandBase64Keys([]string{"mg $b64{a} b\r\n"}, "c000w_")
	if want := "mg " + base64.StdEncoding.EncodeToString([]byte("c000w_a")) + " b\r\n"; steps[0] != want {
		t.Errorf("expandBase64Keys: %q, want %q", steps[0], want)
	}
	if len(enc) != 1 {
		t.Errorf("expandBase64Keys: %d encodings recorded, want 1", len(enc))
	}
}
