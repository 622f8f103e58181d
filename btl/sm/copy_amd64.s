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

// func copyStream(dst, src *byte, n uintptr)
// Non-temporal stores, 64 bytes a round: n is a positive multiple of 64
// and dst 32-byte aligned. The lines go to memory without being fetched
// or invalidated one by one in the peer core's cache; SFENCE orders them
// before the store that publishes the fragment.
TEXT ·copyStream(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loop:
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JNZ loop
	SFENCE
	VZEROUPPER
	RET
