package protocol

// appendDecimal appends v in base 10, like strconv.AppendUint(dst, v, 10). Every VALUE line carries two
// numbers (flags, usually 0, and the length), and strconv's general path was 10% of a get hit served
// from a warm cache (BenchmarkGetHit in server): this writes numbers below 10000 straight into dst, and
// longer ones two digits per step from a table, with no base switch and no sign handling.
func appendDecimal(dst []byte, v uint64) []byte {
	// Flags and value lengths are nearly always below 10000: append those digits directly.
	switch {
	case v < 10:
		return append(dst, byte('0'+v))
	case v < 100:
		return append(dst, digitPairs[v*2], digitPairs[v*2+1])
	case v < 1000:
		q := v / 100
		r := (v - q*100) * 2
		return append(dst, byte('0'+q), digitPairs[r], digitPairs[r+1])
	case v < 10000:
		q := v / 100
		r := (v - q*100) * 2
		return append(dst, digitPairs[q*2], digitPairs[q*2+1], digitPairs[r], digitPairs[r+1])
	}
	var b [20]byte // the longest uint64 has 20 digits
	i := len(b)
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		b[i], b[i+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		b[i], b[i+1] = digitPairs[v*2], digitPairs[v*2+1]
	} else {
		i--
		b[i] = byte('0' + v)
	}
	return append(dst, b[i:]...)
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
