//go:build linux && amd64 && !race

#include "textflag.h"

// func getg() uintptr
TEXT ·getg(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET

// func biasEnter(l *engineLock) bool
// owner at 0(l), inside at 8(l), revoke at 12(l). The g pointer is never
// 0, so an unbiased lock (owner 0) fails the comparison.
TEXT ·biasEnter(SB), NOSPLIT, $0-9
	MOVQ l+0(FP), AX
	MOVQ (TLS), CX
	CMPQ CX, 0(AX)
	JNE  no
	MOVL $1, 8(AX)
	MOVL 12(AX), DX
	TESTL DX, DX
	JNE  undo
	MOVB $1, ret+8(FP)
	RET
undo:
	MOVL $0, 8(AX)
no:
	MOVB $0, ret+8(FP)
	RET
