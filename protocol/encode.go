package protocol

import "strconv"

// Reply encoding. Every function appends to dst and returns the extended slice, like
// strconv.Append*: with a dst of sufficient capacity nothing is allocated.

// Fixed replies, exactly as memcached writes them. Do not modify.
var (
	ReplyStored    = []byte("STORED\r\n")
	ReplyNotStored = []byte("NOT_STORED\r\n")
	ReplyExists    = []byte("EXISTS\r\n")
	ReplyNotFound  = []byte("NOT_FOUND\r\n")
	ReplyDeleted   = []byte("DELETED\r\n")
	ReplyTouched   = []byte("TOUCHED\r\n")
	ReplyEnd       = []byte("END\r\n")
	ReplyOK        = []byte("OK\r\n")
	ReplyReset     = []byte("RESET\r\n") // "stats reset"
	ReplyError     = []byte("ERROR\r\n")
	ReplyMN        = []byte("MN\r\n") // mn
	ReplyEN        = []byte(MetaEN + "\r\n")
	ReplyHD        = []byte(MetaHD + "\r\n")
	ReplyNF        = []byte(MetaNF + "\r\n")
	ReplyNS        = []byte(MetaNS + "\r\n")
	ReplyEX        = []byte(MetaEX + "\r\n")

	ReplyServerErrorTooLarge  = []byte("SERVER_ERROR object too large for cache\r\n")
	ReplyServerErrorOOMStore  = []byte("SERVER_ERROR out of memory storing object\r\n")
	ReplyServerErrorOOMRead   = []byte("SERVER_ERROR out of memory reading request\r\n")
	ReplyServerErrorOOM       = []byte("SERVER_ERROR out of memory\r\n")
	ReplyClientErrorBadFormat = []byte("CLIENT_ERROR bad command line format\r\n")
	ReplyClientErrorNonNumber = []byte("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
	ReplyClientErrorBadChunk  = []byte("CLIENT_ERROR bad data chunk\r\n")
	ReplyShutdownDisabled     = []byte("ERROR: shutdown not enabled\r\n")
	ReplyShutdownBadMode      = []byte("CLIENT_ERROR invalid shutdown mode\r\n")
)

const crlf = "\r\n"

// AppendValue appends "VALUE <key> <flags> <bytes>\r\n<data>\r\n".
func AppendValue(dst, key []byte, flags uint32, value []byte) []byte {
	dst = AppendValueHeader(dst, key, flags, len(value), 0, false)
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// AppendValueCas appends "VALUE <key> <flags> <bytes> <cas>\r\n<data>\r\n" (gets, gats).
func AppendValueCas(dst, key []byte, flags uint32, value []byte, cas uint64) []byte {
	dst = AppendValueHeader(dst, key, flags, len(value), cas, true)
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// AppendValueHeader appends only the VALUE line, for callers that write the data (and its
// "\r\n") separately, e.g. straight from slab memory.
func AppendValueHeader(dst, key []byte, flags uint32, n int, cas uint64, withCas bool) []byte {
	dst = append(dst, "VALUE "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = appendDecimal(dst, uint64(flags))
	dst = append(dst, ' ')
	dst = appendDecimal(dst, uint64(n))
	if withCas {
		dst = append(dst, ' ')
		dst = appendDecimal(dst, cas)
	}
	return append(dst, crlf...)
}

// AppendLValue appends a lease-get miss block, "LVALUE <key> <token> <flags> <bytes>\r\n
// <data>\r\n" (token 1 = hot miss; value is the stale value, or empty with flags 0).
func AppendLValue(dst, key []byte, token uint64, flags uint32, value []byte) []byte {
	dst = AppendLValueHeader(dst, key, token, flags, len(value))
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// AppendLValueHeader appends only the LVALUE line.
func AppendLValueHeader(dst, key []byte, token uint64, flags uint32, n int) []byte {
	dst = append(dst, "LVALUE "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = appendDecimal(dst, token)
	dst = append(dst, ' ')
	dst = appendDecimal(dst, uint64(flags))
	dst = append(dst, ' ')
	dst = appendDecimal(dst, uint64(n))
	return append(dst, crlf...)
}

// AppendUint appends v in decimal and "\r\n": the incr/decr reply.
func AppendUint(dst []byte, v uint64) []byte {
	dst = appendDecimal(dst, v)
	return append(dst, crlf...)
}

// AppendStat appends "STAT <name> <value>\r\n" for a string value.
func AppendStat(dst []byte, name, value string) []byte {
	dst = appendStatName(dst, name)
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// AppendStatBytes is AppendStat for a []byte value.
func AppendStatBytes(dst []byte, name string, value []byte) []byte {
	dst = appendStatName(dst, name)
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// AppendStatUint appends "STAT <name> <decimal>\r\n".
func AppendStatUint(dst []byte, name string, v uint64) []byte {
	dst = appendStatName(dst, name)
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, crlf...)
}

// AppendStatInt appends "STAT <name> <signed decimal>\r\n".
func AppendStatInt(dst []byte, name string, v int64) []byte {
	dst = appendStatName(dst, name)
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, crlf...)
}

// AppendStatBool appends "STAT <name> yes|no\r\n", memcached's form for boolean settings.
func AppendStatBool(dst []byte, name string, v bool) []byte {
	if v {
		return AppendStat(dst, name, "yes")
	}
	return AppendStat(dst, name, "no")
}

// AppendStatTimeval appends "STAT <name> <sec>.<usec>\r\n" with six microsecond digits, the
// format memcached uses for rusage_user and rusage_system.
func AppendStatTimeval(dst []byte, name string, sec, usec int64) []byte {
	dst = appendStatName(dst, name)
	dst = strconv.AppendInt(dst, sec, 10)
	dst = append(dst, '.')
	const usecDigits = 6
	var digits [usecDigits]byte
	for i := usecDigits - 1; i >= 0; i-- {
		digits[i] = byte('0' + usec%10)
		usec /= 10
	}
	dst = append(dst, digits[:]...)
	return append(dst, crlf...)
}

func appendStatName(dst []byte, name string) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	return append(dst, ' ')
}

// AppendVersion appends "VERSION <v>\r\n".
func AppendVersion(dst []byte, v string) []byte {
	dst = append(dst, "VERSION "...)
	dst = append(dst, v...)
	return append(dst, crlf...)
}

// AppendLine appends an arbitrary reply line (e.g. "CLIENT_ERROR ..." from the server's own
// checks) followed by "\r\n".
func AppendLine(dst []byte, line string) []byte {
	dst = append(dst, line...)
	return append(dst, crlf...)
}
