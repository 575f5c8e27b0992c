package load

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func printLoad(out io.Writer, r *Result) {
	c := r.Config
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	get := c.GetCmd
	if c.Binary {
		get = "binary GET"
		if c.MultiGet > 1 {
			get = "binary GETKQ+NOOP"
		}
	}
	fmt.Fprintf(tw, "load\t%s: %d conns, pipeline %d, %s x%d keys, get ratio %.2f, %d-byte values, %d %s keys\n",
		c.Addr, c.Conns, c.Pipeline, get, c.MultiGet, c.GetRatio, c.ValueSize, c.Keys, distName(c.Dist, c.ZipfS))
	fmt.Fprintf(tw, "ops/s\t%.0f\t(%d requests in %.2fs; %.0f get keys/s)\n", r.OpsPerSec, r.Requests, r.Seconds, r.KeysPerSec)
	fmt.Fprintf(tw, "hit ratio\t%.4f\t(%d sets, %d not stored)\n", r.HitRatio, r.Sets, r.SetFailed)
	if r.Errors > 0 {
		fmt.Fprintf(tw, "ERRORS\t%d wrong replies: the numbers are not valid\tfirst: %s\n", r.Errors, r.ErrorSample)
	}
	fmt.Fprintf(tw, "latency per %s\tp50 %.0fus\tp99 %.0fus\tp99.9 %.0fus\tmean %.0fus\tmax %.0fus\n",
		r.LatencyPer, r.P50us, r.P99us, r.P999us, r.MeanUs, r.MaxUs)
	if r.TLSState != nil {
		fmt.Fprintf(tw, "TLS\t%s\n", r.TLSState)
	}
	fmt.Fprintf(tw, "generator CPU\t%.2f cores\n", r.GenCores)
	if c.ServerPID > 0 {
		fmt.Fprintf(tw, "server CPU\t%.2f cores\t%.2f us/op\n", r.ServerCores, r.ServerCPUUsPerOp)
	}
	tw.Flush()
}

func distName(d string, s float64) string {
	if d == "zipf" {
		return fmt.Sprintf("zipf(s=%.2f)", s)
	}
	return d
}

func printFill(out io.Writer, r *FillResult) {
	c := r.Config
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fill\t%s: %d items, %d-byte keys, %d-byte values, %d conns x %d pipelined sets\n",
		c.Addr, c.Keys, c.KeySize, c.ValueSize, c.Conns, c.Batch)
	to := ""
	if r.TimedOut {
		to = " (stopped at -max-time)"
	}
	fmt.Fprintf(tw, "written\t%d in %.2fs = %.0f sets/s%s\t(stored %d, not stored %d, server errors %d)\n",
		r.Written, r.Seconds, r.SetsPerSec, to, r.Stored, r.NotStored, r.ServerErrors)
	if c.ServerPID > 0 {
		fmt.Fprintf(tw, "RSS\t%s -> %s\toverhead %.1f bytes/item beyond key+value\n",
			MiB(r.RSSBefore), MiB(r.RSSAfter), r.BytesPerItem)
	}
	if r.Verified > 0 {
		fmt.Fprintf(tw, "verify\t%d sampled: %d present byte-exact, %d missing, %d corrupt\n",
			r.Verified, r.Present, r.Missing, r.Corrupt)
	}
	fmt.Fprintf(tw, "server stats\tcurr_items %d, evictions %d, limit_maxbytes %s\n",
		r.CurrItems, r.Evictions, MiB(r.LimitMaxbytes))
	tw.Flush()
}

func printHit(out io.Writer, r *HitResult) {
	c := r.Config
	fmt.Fprintf(out, "hitratio %s: %d %s keys (%.0f MB of keys+values), %d warm-up + %d counted requests\n",
		c.Addr, c.Keys, distName(c.Dist, c.ZipfS), r.FootprintMB, c.Warmup, c.Requests)
	fmt.Fprintf(out, "hit ratio %.4f (%d of %d) in %.1fs; curr_items %d, evictions %d\n",
		r.HitRatio, r.Hits, r.Requests, r.Seconds, r.CurrItems, r.Evictions)
}

// MiB formats a byte count in mebibytes.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
