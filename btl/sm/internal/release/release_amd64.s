#include "textflag.h"

// func Store64(addr *uint64, v uint64)
// A plain MOV: on amd64 (TSO) stores are not reordered with older stores,
// and the call keeps the compiler from moving stores across it, so this is
// a release store without the full barrier of XCHG.
TEXT ·Store64(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func Store32(addr *uint32, v uint32)
TEXT ·Store32(SB), NOSPLIT, $0-12
	MOVQ addr+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
