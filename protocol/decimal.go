package protocol

// appendDecimal appends v in base 10, like strconv.AppendUint(dst, v, 10). Every VALUE line carries two
// numbers (flags and the length), and strconv's general path was 10% of a get hit served from a warm cache
// (BenchmarkGetHit in server). This splits v into groups of four digits with divisions by constants and
// writes each group as two pairs from a table: no loop, no base switch, no sign handling, and no scratch
// copy. Flags are often a hash or a bit set of up to ten digits, which a two-digits-per-step loop took
// five steps and a copy for (BenchmarkAppendValueHeaderBigFlags, callgrind: 331 -> 259 instructions per line).
func appendDecimal(dst []byte, v uint64) []byte {
	// Lengths and most flags are below 10000: those digits are appended right here.
	switch {
	case v < 10:
		return append(dst, byte('0'+v))
	case v < 100:
		return append(dst, digitPairs[v*2], digitPairs[v*2+1])
	case v < 1000:
		q := v / 100
		r := (v - q*100) * 2
		return append(dst, byte('0'+q), digitPairs[r], digitPairs[r+1])
	case v < 1e4:
		return append4(dst, v)
	case v < 1e8:
		return append4(appendDecimal(dst, v/1e4), v%1e4)
	case v < 1e16:
		return append8(appendDecimal(dst, v/1e8), v%1e8) // the leading group recurses once
	}
	return append8(append8(appendDecimal(dst, v/1e16), v/1e8%1e8), v%1e8) // v/1e16 <= 1844
}

// append4 appends exactly four digits of v < 10000 (with leading zeros).
func append4(dst []byte, v uint64) []byte {
	q := v / 100
	hi, lo := q*2, (v-q*100)*2
	return append(dst, digitPairs[hi], digitPairs[hi+1], digitPairs[lo], digitPairs[lo+1])
}

// append8 appends exactly eight digits of v < 10^8 (with leading zeros).
func append8(dst []byte, v uint64) []byte {
	q := v / 1e4
	return append4(append4(dst, q), v-q*1e4)
}

// digitPairs holds "00" through "99".
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"
