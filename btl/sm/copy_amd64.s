#include "textflag.h"

// func copyLines(dst, src *byte, n uintptr)
// REP MOVSB: with ERMS/FSRM the processor moves whole cache lines without
// first reading the destination's, which a line just read by the peer
// core would otherwise need (a read-for-ownership per line).
TEXT ·copyLines(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	REP; MOVSB
	RET
