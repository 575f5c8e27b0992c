package protocol

import "encoding/binary"

// appendDecimal appends v in base 10, like strconv.AppendUint(dst, v, 10). Every VALUE line carries two
// numbers (flags and the length), and strconv's general path was 10% of a get hit served from a warm cache
// (BenchmarkGetHit in server). This splits v into groups of digits with divisions by constants: no loop, no
// base switch, no sign handling, and no scratch copy. A group of up to four is written as pairs from a
// table, a group of eight as one word (spread8). Flags are often a hash or a bit set of up to ten digits,
// which a two-digits-per-step loop took five steps and a copy for (BenchmarkAppendValueHeaderBigFlags,
// callgrind: 331 instructions per line; groups of four, 259; a word for eight, 221).
//
// Writing the whole VALUE line into room reserved once, instead of appending, was tried twice and cost
// more: 445 and 247 instructions with ten-digit flags, 301 and 202 with flags 0 (150 appending).
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
	case v < 1e10: // flags of nine or ten digits
		hi := v / 1e8
		if hi < 10 {
			return append8(append(dst, byte('0'+hi)), v-hi*1e8)
		}
		return append8(append(dst, digitPairs[hi*2], digitPairs[hi*2+1]), v-hi*1e8)
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

// append8 appends exactly eight digits of v < 10^8 (with leading zeros), in one eight-byte append.
func append8(dst []byte, v uint64) []byte {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], spread8(uint32(v))+asciiZeros)
	return append(dst, w[:]...)
}

// asciiZeros turns eight digit values (0-9, one per byte) into their ASCII characters.
const asciiZeros = 0x3030303030303030

// spread8 returns the eight decimal digits of v < 10^8 (with leading zeros) as byte values 0-9 of one word,
// the most significant digit in the lowest byte: once '0' is added to each byte, a little-endian store
// writes them in reading order. It splits v in halves, the halves in pairs and the pairs in digits, all the
// parts of one level at once in lanes of the word: each division by a constant is a multiply and a shift,
// exact for the values its lanes hold, and no lane's product reaches the next lane.
func spread8(v uint32) uint64 {
	x := uint64(v)
	hi := x / 1e4
	w := hi | (x-hi*1e4)<<32                    // lanes of 32 bits: v/10^4, v%10^4
	q := (w * 5243 >> 19) & 0x0000007f_0000007f // each lane / 100 (5243/2^19: exact below 43699)
	w = q | (w-q*100)<<16                       // lanes of 16 bits, each < 100
	q = (w * 103 >> 10) & 0x000f000f_000f000f   // each lane / 10 (103/2^10: exact below 179)
	return q | (w-q*10)<<8                      // lanes of 8 bits: one digit each
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
