//go:build linux && amd64 && !race

#include "textflag.h"

// func getg() uintptr
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET

// func lockFast(l *engineLock)
// owner at 0(l), inside at 8(l), revoke at 12(l), fast at 16(l). The g
// pointer is never 0, so an unbiased lock (owner 0) fails the comparison.
// lockSlow takes the same argument in the same place: a tail jump.
TEXT ·lockFast(SB), NOSPLIT, $0-8
	MOVQ l+0(FP), AX
	MOVQ (TLS), CX
	CMPQ CX, 0(AX)
	JNE  slow
	MOVL $1, 8(AX)
	MOVL 12(AX), DX
	TESTL DX, DX
	JNE  undo
	MOVL $1, 16(AX)
	RET
undo:
	MOVL $0, 8(AX)
slow:
	JMP ·lockSlow(SB)

// func unlockFast(l *engineLock)
TEXT ·unlockFast(SB), NOSPLIT, $0-8
	MOVQ l+0(FP), AX
	CMPL 16(AX), $0
	JEQ  slow
	MOVL $0, 16(AX)
	MOVL $0, 8(AX)
	RET
slow:
	JMP ·unlockSlow(SB)
