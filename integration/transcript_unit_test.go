package integration

import "testing"

// TestNormalize checks the normalizer itself: it must blank CAS, VERSION and
// STAT values, and nothing else, not even inside data blocks.
func TestNormalize(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"cas blanked", "VALUE k 0 1 42\r\nx\r\nEND\r\n", "VALUE k 0 1 <cas>\r\nx\r\nEND\r\n"},
		{"get untouched", "VALUE k 3 1\r\nx\r\nEND\r\n", "VALUE k 3 1\r\nx\r\nEND\r\n"},
		{"data looking like VALUE kept", "VALUE k 0 16\r\nVALUE a 0 1 123\r\nEND\r\n", "VALUE k 0 16\r\nVALUE a 0 1 123\r\nEND\r\n"},
		{"version", "VERSION 1.6.18\r\n", "VERSION <version>\r\n"},
		{"stat", "STAT pid 123\r\nEND\r\n", "STAT pid <value>\r\nEND\r\n"},
		{"bare newline kept", "VERSION x\n", "VERSION <version>\n"},
		{"prefix", "VALUE c001w_a 0 1\r\nx\r\nEND\r\n", "VALUE $ka 0 1\r\nx\r\nEND\r\n"},
		{"errors untouched", "EXISTS\r\nSERVER_ERROR out of memory\r\n", "EXISTS\r\nSERVER_ERROR out of memory\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := normalize([]byte(c.in), "c001w_"); got != c.want {
				t.Errorf("normalize(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if got := lastCAS([]byte("VALUE a 0 1 5\r\nx\r\nVALUE b 0 1 7\r\ny\r\nEND\r\n")); got != "7" {
		t.Errorf("lastCAS = %q, want 7", got)
	}
}
