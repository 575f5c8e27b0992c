#include "textflag.h"

// func prefetch(addr uintptr)
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// func prefetchItemSpan(addr uintptr): every cache line that [addr, addr+192) touches: the lines of addr,
// addr+64, addr+128 and addr+191.
TEXT ·prefetchItemSpan(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	ADD $64, R0, R1
	PRFM (R1), PLDL1KEEP
	ADD $128, R0, R1
	PRFM (R1), PLDL1KEEP
	ADD $191, R0, R1
	PRFM (R1), PLDL1KEEP
	RET
