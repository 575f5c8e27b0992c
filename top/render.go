package top

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// Render layout: a label column, then fields separated by two spaces, wrapped to the width.
const (
	labelWidth = 11
	// minWidth is the narrowest layout: a terminal narrower than this is drawn at this width and cut.
	minWidth = 60
	// barWidth is the memory bar's width at most.
	barWidth = 30
	// naText stands for a figure the server does not report.
	naText = "n/a"
)

// Render draws a frame as lines of at most width columns (ASCII only: every byte from the server that is
// not printable ASCII is shown as '?', so a key or a version string cannot move the cursor). maxLines > 0
// bounds the lines, by showing fewer hot keys; 0 draws them all.
func Render(f Frame, width, maxLines int) []string {
	width = max(width, minWidth)
	var b builder
	b.width = width

	head := fmt.Sprintf("%s at %s, up %s", clean(f.Server), clean(f.Addr), formatUptime(f.Uptime))
	if f.SinceStart {
		head += ", rates since start"
	} else {
		head += ", rates over " + f.Interval.Round(10*time.Millisecond).String()
	}
	b.line(head)
	b.line("")

	fields := []string{total(f.Total)}
	for _, c := range f.Commands {
		fields = append(fields, c.Name+" "+formatValue(c.Value, true))
	}
	b.fields("requests", fields)
	hit := naText
	if f.HitRatio.OK {
		hit = fmt.Sprintf("%.1f%%", 100*f.HitRatio.V)
	} else if f.GetHits.OK {
		hit = "- (no gets)"
	}
	b.fields("hit ratio", []string{hit, "hits " + formatValue(f.GetHits, true), "misses " + formatValue(f.GetMisses, true)})
	b.fields("evictions", []string{formatValue(f.Evictions, true)})
	b.fields("memory", memory(f))
	b.fields("conns", []string{formatCount(f.Conns) + " of " + formatCount(f.MaxConns), "new " + formatValue(f.NewConns, true)})
	b.fields("network", []string{"in " + formatBytes(f.BytesRead, true), "out " + formatBytes(f.BytesWritten, true)})
	b.section("leases", f.Leases)
	b.section("grace", f.Grace)
	b.section("hold", f.Hold)
	b.line("")
	b.hotKeys(f, maxLines)
	return b.lines
}

// Text is Render joined into one string with a newline after each line.
func Text(f Frame, width, maxLines int) string {
	return strings.Join(Render(f, width, maxLines), "\n") + "\n"
}

type builder struct {
	width int
	lines []string
}

// line adds s cut to the width.
func (b *builder) line(s string) {
	if len(s) > b.width {
		s = s[:b.width]
	}
	b.lines = append(b.lines, s)
}

// fields adds a labelled row of fields, wrapped under the label column when the width is reached.
func (b *builder) fields(label string, fields []string) {
	cur := fmt.Sprintf("%-*s", labelWidth, label)
	started := false
	for _, fd := range fields {
		if started && len(cur)+2+len(fd) > b.width {
			b.line(cur)
			cur, started = strings.Repeat(" ", labelWidth), false
		}
		if started {
			cur += "  "
		}
		cur += fd
		started = true
	}
	b.line(cur)
}

func (b *builder) section(label string, s Section) {
	if s.State != "" {
		b.fields(label, []string{s.State})
		return
	}
	var fields []string
	for _, fg := range s.Figures {
		fields = append(fields, fg.Name+" "+formatValue(fg.Value, fg.PerSecond))
	}
	b.fields(label, fields)
}

// hotKeys adds the hot keys table, as many rows as maxLines leaves room for (at least one).
func (b *builder) hotKeys(f Frame, maxLines int) {
	if f.HotErr != nil {
		var se *ServerError
		why := f.HotErr.Error()
		if errors.As(f.HotErr, &se) {
			why = "the server answered " + se.Line
		}
		b.line("hot keys: not available (" + clean(why) + ")")
		return
	}
	h := f.Hot
	b.line(fmt.Sprintf("hot keys: sampled 1 in %d, rates over %d s", h.SampleRate, h.WindowSeconds))
	if len(h.Keys) == 0 {
		b.line("  (none)")
		return
	}
	rows := len(h.Keys)
	if maxLines > 0 {
		rows = min(rows, max(maxLines-len(b.lines)-1, 1))
	}
	// Keys longer than the width leaves them are cut: the table is for spotting them, `stats hotkeys` has
	// them whole.
	b.line(fmt.Sprintf("%3s %8s %7s %8s %8s  %s", "#", "req/s", "share", "reads/s", "writes/s", "key"))
	for i, k := range h.Keys[:rows] {
		b.line(fmt.Sprintf("%3d %8d %6.2f%% %8d %8d  %s", i+1, k.Rate, k.Share, k.Reads, k.Writes, displayKey(k.Key)))
	}
}

func total(v Value) string { return "total " + formatValue(v, true) }

func memory(f Frame) []string {
	used := formatBytes(f.Bytes, false) + " of " + formatBytes(f.LimitBytes, false)
	fields := []string{used}
	if f.Bytes.OK && f.LimitBytes.OK && f.LimitBytes.V > 0 {
		frac := math.Min(f.Bytes.V/f.LimitBytes.V, 1)
		fields[0] += fmt.Sprintf(" (%.1f%%)", 100*f.Bytes.V/f.LimitBytes.V)
		n := int(math.Round(frac * barWidth))
		fields = append(fields, "["+strings.Repeat("#", n)+strings.Repeat(".", barWidth-n)+"]")
	}
	return append(fields, "items "+formatCount(f.Items))
}

// formatUptime counts days past the first: "3d4h0m5s", not "76h0m5s".
func formatUptime(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.String()
	}
	return fmt.Sprintf("%dd%s", d/day, d%day)
}

// formatValue shows a rate ("/s" appended) or a gauge; n/a when the server lacks it.
func formatValue(v Value, perSecond bool) string {
	if !v.OK {
		return naText
	}
	s := formatNumber(v.V)
	if perSecond {
		s += "/s"
	}
	return s
}

func formatCount(v Value) string {
	if !v.OK {
		return naText
	}
	return formatNumber(v.V)
}

// formatNumber: whole numbers from 10 on, one decimal below (a rate of 0.5/s is not 0).
func formatNumber(x float64) string {
	if x == math.Trunc(x) || math.Abs(x) >= 10 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// formatBytes in binary units.
func formatBytes(v Value, perSecond bool) string {
	if !v.OK {
		return naText
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	x, u := v.V, 0
	for x >= 1024 && u < len(units)-1 {
		x /= 1024
		u++
	}
	s := fmt.Sprintf("%.1f %s", x, units[u])
	if u == 0 {
		s = fmt.Sprintf("%.0f B", x)
	}
	if perSecond {
		s += "/s"
	}
	return s
}

// displayKey decodes a key the server sent URL-encoded, when the decoded key is printable ASCII; any other
// key is shown as sent, which is unambiguous and safe for the terminal.
func displayKey(encoded string) string {
	key, err := url.PathUnescape(encoded)
	if err != nil || clean(key) != key {
		return clean(encoded)
	}
	return key
}

// clean replaces every byte that is not printable ASCII.
func clean(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return strings.Map(func(r rune) rune {
				if r < 0x20 || r > 0x7e {
					return '?'
				}
				return r
			}, s)
		}
	}
	return s
}
