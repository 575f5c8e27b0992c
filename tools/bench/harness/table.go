package harness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// table prints rows of cells with aligned columns and a rule under the header: the first column (the
// row's name) left-aligned, the numbers right-aligned.
func table(out io.Writer, header []string, rows [][]string) {
	width := len(header[0])
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-len(s)) }
	line := func(cells []string) string {
		return pad(cells[0]) + "\t" + strings.Join(cells[1:], "\t") + "\t"
	}
	rule := make([]string, len(header))
	for i, h := range header {
		rule[i] = strings.Repeat("-", len(h))
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, line(header))
	fmt.Fprintln(tw, line(rule))
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	tw.Flush()
}
