#include "textflag.h"

// dst[i] += src[i] over n bytes (a multiple of 32), four 32-byte lanes a
// turn while there are 128 bytes, then one. Element by element it is the
// scalar addition — VADDPS/VADDPD round each lane as ADDSS/ADDSD do — so
// a reduction gives the same bits whichever path a block takes.
#define ADDLOOP(name, OP) \
TEXT name(SB), NOSPLIT, $0-24 \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
big: \
	CMPQ CX, $128 \
	JB one \
	VMOVDQU (DI), Y0 \
	VMOVDQU 32(DI), Y1 \
	VMOVDQU 64(DI), Y2 \
	VMOVDQU 96(DI), Y3 \
	OP (SI), Y0, Y0 \
	OP 32(SI), Y1, Y1 \
	OP 64(SI), Y2, Y2 \
	OP 96(SI), Y3, Y3 \
	VMOVDQU Y0, (DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, DI \
	ADDQ $128, SI \
	SUBQ $128, CX \
	JMP big \
one: \
	CMPQ CX, $32 \
	JB done \
	VMOVDQU (DI), Y0 \
	OP (SI), Y0, Y0 \
	VMOVDQU Y0, (DI) \
	ADDQ $32, DI \
	ADDQ $32, SI \
	SUBQ $32, CX \
	JMP one \
done: \
	VZEROUPPER \
	RET

// func addPS(dst, src *byte, n uintptr)
ADDLOOP(·addPS, VADDPS)

// func addPD(dst, src *byte, n uintptr)
ADDLOOP(·addPD, VADDPD)

// func addD(dst, src *byte, n uintptr)
ADDLOOP(·addD, VPADDD)

// func addQ(dst, src *byte, n uintptr)
ADDLOOP(·addQ, VPADDQ)
