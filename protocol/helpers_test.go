package protocol

import (
	"fmt"
	"strings"
)

// describe renders a parsed request compactly for table comparisons; zero fields are omitted.
func describe(r *Request) string {
	var b strings.Builder
	b.WriteString(r.Cmd.String())
	if len(r.Keys) > 0 {
		fmt.Fprintf(&b, " keys=%s", joinQ(r.Keys))
	}
	if r.Flags != 0 {
		fmt.Fprintf(&b, " f=%d", r.Flags)
	}
	if r.Exptime != 0 {
		fmt.Fprintf(&b, " e=%d", r.Exptime)
	}
	if r.Bytes != 0 {
		fmt.Fprintf(&b, " b=%d", r.Bytes)
	}
	if r.Cas != 0 {
		fmt.Fprintf(&b, " cas=%d", r.Cas)
	}
	if r.Delta != 0 {
		fmt.Fprintf(&b, " d=%d", r.Delta)
	}
	if r.Noreply {
		b.WriteString(" noreply")
	}
	if r.Data != nil {
		fmt.Fprintf(&b, " data=%q", r.Data)
	}
	if len(r.Args) > 0 {
		fmt.Fprintf(&b, " args=%s", joinQ(r.Args))
	}
	return b.String()
}

func joinQ(bs [][]byte) string {
	parts := make([]string, len(bs))
	for i, x := range bs {
		parts[i] = string(x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// describeErr renders a parse error: "ERR <reply line>", "SILENT", plus swallow/close markers.
func describeErr(err error) string {
	e, ok := err.(*Error)
	if !ok {
		return fmt.Sprintf("FOREIGN %v", err)
	}
	s := "SILENT"
	if len(e.Reply) > 0 {
		s = "ERR " + strings.TrimSuffix(string(e.Reply), "\r\n")
	}
	if e.Swallow > 0 {
		s += fmt.Sprintf(" swallow=%d", e.Swallow)
	}
	if e.Close {
		s += " CLOSE"
	}
	return s
}

// drive plays the caller's side of the contract over a sequence of chunks, the way the server
// does: append to a pending buffer, honour Swallow, stop at Close. It returns one event per
// request or error, then the leftover state. Swallow counts are folded into the leftover state
// (not the error event) because how much is swallowed "now" versus "later" depends on chunking.
func drive(p *Parser, chunks [][]byte) []string {
	var (
		pending []byte
		swallow int
		events  []string
		req     Request
	)
	for _, c := range chunks {
		pending = append(pending, c...)
		for {
			if swallow > 0 {
				k := min(swallow, len(pending))
				pending = pending[k:]
				swallow -= k
			}
			if len(pending) == 0 {
				break
			}
			n, err := p.Parse(pending, &req)
			if n < 0 || n > len(pending) {
				events = append(events, fmt.Sprintf("BAD n=%d len=%d", n, len(pending)))
				return events
			}
			if err != nil {
				e := err.(*Error)
				ev := "SILENT"
				if len(e.Reply) > 0 {
					ev = "ERR " + strings.TrimSuffix(string(e.Reply), "\r\n")
				}
				if e.Close {
					return append(events, ev+" CLOSE")
				}
				events = append(events, ev)
				pending = pending[n:]
				swallow = e.Swallow
				continue
			}
			if n == 0 {
				break
			}
			events = append(events, describe(&req))
			pending = pending[n:]
		}
	}
	return append(events, fmt.Sprintf("rest=%q swallow=%d", pending, swallow))
}

// splitEvery cuts b into chunks of size k (the last may be shorter).
func splitEvery(b []byte, k int) [][]byte {
	var out [][]byte
	for len(b) > k {
		out = append(out, b[:k])
		b = b[k:]
	}
	return append(out, b)
}
