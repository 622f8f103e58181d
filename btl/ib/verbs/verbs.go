// Package verbs is the InfiniBand verbs interface the ib BTL is written
// against. Its shape is libibverbs': a Provider lists and opens devices; a
// Device has ports, protection domains, completion queues and completion
// channels; a protection domain (PD) owns memory regions (MR), queue pairs
// (QP), shared receive queues (SRQ) and address handles (AH); work requests
// are posted to QPs and SRQs and report through work completions (WC).
//
// The semantics are the InfiniBand Architecture's, because the BTL above
// relies on them (seed 000 §2, seed 002 §1, seed 004 §2):
//
//   - An RC QP moves through RESET → INIT → RTR → RTS, and to ERR on any
//     fatal error, after which every outstanding work request completes with
//     a flush error. Delivery on a QP is reliable and in order.
//   - Receive WQEs are consumed in FIFO order, whatever the message size; a
//     message longer than the buffer at the head of the queue is an error
//     completion on both sides and moves the QPs to ERR.
//   - When no receive WQE is posted the responder answers RNR NAK; the
//     requester waits the responder's min_rnr_timer and retries, rnr_retry
//     times (7 means forever), then completes the request with
//     WCRNRRetryExcErr and moves the QP to ERR.
//   - RDMA write and read are checked against the remote key, the access
//     flags and the registered range; a violation is a remote access error
//     and moves the QP to ERR. At most max_rd_atomic reads are outstanding
//     per QP; further work requests wait in the send queue.
//   - A CQ armed with ReqNotify(solicitedOnly=true) raises one event on its
//     completion channel at the next receive completion of a message sent
//     with the solicited flag (or at any error completion); one arming
//     yields at most one event (seed 004 §4.3, interrupt suppression).
//   - An SRQ armed with a limit raises the SRQ-limit-reached async event
//     once when its posted WQEs fall below the limit, and disarms.
//
// Two providers implement it: softrc (a software HCA over TCP, always built)
// and rdmacore (libibverbs through cgo, build tag rdmacore).
//
// Addresses in scatter/gather entries and remote addresses are virtual
// addresses, as in libibverbs; AddrOf gives the address of a Go slice,
// whose backing array Go's garbage collector never moves.
package verbs

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Errors returned by verbs calls; providers wrap them with context.
var (
	// ErrInvalid reports a bad argument (the EINVAL of libibverbs).
	ErrInvalid = errors.New("verbs: invalid argument")
	// ErrQueueFull reports a full send, receive or completion queue (ENOMEM).
	ErrQueueFull = errors.New("verbs: queue full")
	// ErrState reports an operation not allowed in the QP's current state.
	ErrState = errors.New("verbs: wrong QP state")
	// ErrNoDevice reports an unknown device or port.
	ErrNoDevice = errors.New("verbs: no such device")
	// ErrClosed reports use of a destroyed object or closed device.
	ErrClosed = errors.New("verbs: closed")
	// ErrProtection reports a local key or access-flag violation at post
	// time.
	ErrProtection = errors.New("verbs: protection error")
)

// Provider finds and opens devices (ibv_get_device_list, ibv_open_device).
type Provider interface {
	// Name is the provider's name ("softrc", "rdmacore").
	Name() string
	// Devices lists the devices the provider offers.
	Devices() ([]DeviceInfo, error)
	// Open opens the named device.
	Open(name string) (Device, error)
}

// DeviceInfo names a device in a provider's list.
type DeviceInfo struct {
	Name string
	GUID uint64
}

// Device is an open HCA context (struct ibv_context).
type Device interface {
	// Name is the device name ("softrc0", "mlx5_0").
	Name() string
	// Query returns the device's attributes (ibv_query_device).
	Query() (DeviceAttr, error)
	// QueryPort returns a port's attributes; ports count from 1.
	QueryPort(port uint8) (PortAttr, error)
	// AllocPD allocates a protection domain.
	AllocPD() (PD, error)
	// CreateCompChannel creates a completion event channel.
	CreateCompChannel() (CompChannel, error)
	// CreateCQ creates a completion queue of at least cqe entries, whose
	// events (if ch is not nil) go to ch.
	CreateCQ(cqe int, ch CompChannel) (CQ, error)
	// PollAsyncEvent returns the next asynchronous event, if any, without
	// blocking (ibv_get_async_event on a non-blocking fd, plus the ack).
	PollAsyncEvent() (AsyncEvent, bool)
	// Close releases the context.
	Close() error
}

// DeviceAttr are the limits of a device (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	VendorID        uint32
	VendorPartID    uint32
	PhysPortCnt     int
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int // most reads a QP may have outstanding as requester
	MaxQPInitRdAtom int // most reads a QP serves at once as responder
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
}

// PortState is the logical state of a port.
type PortState uint8

// Port states (enum ibv_port_state).
const (
	PortNop    PortState = 0
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	}
	return "NOP"
}

// MTU is an InfiniBand path MTU code (enum ibv_mtu).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes (0 for an invalid code).
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// LinkLayer says what a port runs on.
type LinkLayer uint8

// Link layers.
const (
	LinkInfiniBand LinkLayer = 1
	LinkEthernet   LinkLayer = 2
)

// GID is a 128-bit global identifier (an IPv6 address, for RoCE and softrc
// an IPv4-mapped one).
type GID [16]byte

// PortAttr are a port's attributes (struct ibv_port_attr, GID index 0
// folded in).
type PortAttr struct {
	State     PortState
	MaxMTU    MTU
	ActiveMTU MTU
	LID       uint16
	LMC       uint8
	GID       GID
	LinkLayer LinkLayer
	// Rate is the link's data rate in bytes per second (from the active
	// width and speed; for softrc the configured rate, 0 if unlimited).
	Rate float64
}

// Access are memory-region access flags (enum ibv_access_flags).
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1
	AccessRemoteWrite  Access = 2
	AccessRemoteRead   Access = 4
	AccessRemoteAtomic Access = 8
)

// PD is a protection domain.
type PD interface {
	// RegMR registers buf. The memory must stay alive and unmoved until
	// Dereg; the MR keeps a reference to it.
	RegMR(buf []byte, access Access) (MR, error)
	// CreateQP creates a queue pair in state RESET.
	CreateQP(attr QPInitAttr) (QP, error)
	// CreateSRQ creates a shared receive queue.
	CreateSRQ(attr SRQInitAttr) (SRQ, error)
	// CreateAH creates an address handle for UD sends.
	CreateAH(attr AHAttr) (AH, error)
	// Dealloc releases the PD; everything created in it must be gone.
	Dealloc() error
}

// MR is a registered memory region.
type MR interface {
	// Addr is the virtual address of the first byte.
	Addr() uint64
	// Len is the registered length in bytes.
	Len() int
	// LKey authorises local access in scatter/gather entries.
	LKey() uint32
	// RKey authorises remote access by RDMA.
	RKey() uint32
	// Bytes is the registered memory.
	Bytes() []byte
	// Dereg deregisters the region.
	Dereg() error
}

// AH is an address handle: where a UD send goes.
type AH interface {
	Destroy() error
}

// AHAttr describes a destination (struct ibv_ah_attr).
type AHAttr struct {
	DLID     uint16
	SL       uint8
	PortNum  uint8
	IsGlobal bool
	DGID     GID
	HopLimit uint8
}

// CompChannel is a completion event channel (struct ibv_comp_channel).
// Go code waits on Ready instead of blocking in ibv_get_cq_event.
type CompChannel interface {
	// Ready carries a token whenever at least one CQ event may be pending.
	// Drain the events with GetEvent after receiving it.
	Ready() <-chan struct{}
	// GetEvent returns the CQ of the next pending event without blocking.
	GetEvent() (CQ, bool)
	// Wake posts a token on Ready as an event would, without one: a
	// consumer that finds work already pending when it arms its CQs wakes
	// its own waiter this way (the arm-then-poll race of ibv_req_notify_cq).
	Wake()
	// Destroy releases the channel; its CQs must be gone.
	Destroy() error
}

// Doorbell is the token side of a CompChannel, as both providers keep it:
// one buffered token posted without blocking, so that any number of
// events before the waiter runs cost it one wake-up and the poster never
// waits. A channel embeds it for Ready and Wake.
type Doorbell chan struct{}

// NewDoorbell returns a doorbell with no token.
func NewDoorbell() Doorbell { return make(Doorbell, 1) }

// Ready is where the token arrives.
func (d Doorbell) Ready() <-chan struct{} { return d }

// Wake posts the token unless one is already waiting.
func (d Doorbell) Wake() {
	select {
	case d <- struct{}{}:
	default:
	}
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc and returns how many.
	// It never blocks. An error means the CQ itself failed (overrun).
	Poll(wc []WC) (int, error)
	// ReqNotify arms the CQ: one event goes to its channel at the next
	// completion (solicitedOnly=false) or at the next solicited or error
	// completion (solicitedOnly=true).
	ReqNotify(solicitedOnly bool) error
	// AckEvents acknowledges n events received for this CQ.
	AckEvents(n int)
	// Destroy releases the CQ.
	Destroy() error
}

// QPType is the transport service of a QP.
type QPType uint8

// QP types (enum ibv_qp_type).
const (
	QPTypeRC QPType = 2
	QPTypeUD QPType = 4
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPCap are the sizes of a QP's queues.
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	// SRQ, if set, supplies the QP's receive WQEs; MaxRecvWR is then
	// ignored.
	SRQ SRQ
	Cap QPCap
	// SigAll makes every send work request signaled.
	SigAll bool
}

// QPState is a QP's state (enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPReset QPState = 0
	QPInit  QPState = 1
	QPRTR   QPState = 2
	QPRTS   QPState = 3
	QPSQD   QPState = 4
	QPSQE   QPState = 5
	QPErr   QPState = 6
)

var qpStateNames = map[QPState]string{
	QPReset: "RESET", QPInit: "INIT", QPRTR: "RTR", QPRTS: "RTS", QPSQD: "SQD", QPSQE: "SQE", QPErr: "ERR",
}

func (s QPState) String() string { return enumName(qpStateNames, s, "QPState") }

// QPAttrMask selects the QPAttr fields a Modify applies (enum
// ibv_qp_attr_mask; the values match libibverbs').
type QPAttrMask uint32

// Attribute mask bits.
const (
	QPAttrState           QPAttrMask = 1 << 0
	QPAttrAccessFlags     QPAttrMask = 1 << 3
	QPAttrPKeyIndex       QPAttrMask = 1 << 4
	QPAttrPort            QPAttrMask = 1 << 5
	QPAttrQKey            QPAttrMask = 1 << 6
	QPAttrAV              QPAttrMask = 1 << 7
	QPAttrPathMTU         QPAttrMask = 1 << 8
	QPAttrTimeout         QPAttrMask = 1 << 9
	QPAttrRetryCnt        QPAttrMask = 1 << 10
	QPAttrRNRRetry        QPAttrMask = 1 << 11
	QPAttrRQPSN           QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic   QPAttrMask = 1 << 13
	QPAttrMinRNRTimer     QPAttrMask = 1 << 15
	QPAttrSQPSN           QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic QPAttrMask = 1 << 17
	QPAttrDestQPN         QPAttrMask = 1 << 20
)

// The attributes each RC transition requires, as the IBA specifies them.
const (
	// RCInitMask moves RESET → INIT.
	RCInitMask = QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
	// RCRTRMask moves INIT → RTR.
	RCRTRMask = QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN |
		QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	// RCRTSMask moves RTR → RTS.
	RCRTSMask = QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry |
		QPAttrMaxQPRdAtomic
	// UDInitMask moves a UD QP RESET → INIT.
	UDInitMask = QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey
	// UDRTRMask moves a UD QP INIT → RTR.
	UDRTRMask = QPAttrState
	// UDRTSMask moves a UD QP RTR → RTS.
	UDRTSMask = QPAttrState | QPAttrSQPSN
)

// QPAttr are a QP's attributes (struct ibv_qp_attr, the fields RC and UD
// use).
type QPAttr struct {
	State       QPState
	PKeyIndex   uint16
	Port        uint8
	QKey        uint32
	AccessFlags Access
	AH          AHAttr
	PathMTU     MTU
	DestQPN     uint32
	RQPSN       uint32
	SQPSN       uint32
	// MaxDestRdAtomic bounds reads this QP serves at once as responder.
	MaxDestRdAtomic uint8
	// MaxRdAtomic bounds reads this QP has outstanding as requester.
	MaxRdAtomic uint8
	// MinRNRTimer is the RNR NAK timer code this QP sends as responder
	// (see RNRTimer).
	MinRNRTimer uint8
	// Timeout is the local ACK timeout code: 4.096 µs × 2^Timeout (0 means
	// infinite).
	Timeout uint8
	// RetryCnt is how often a request is retransmitted after an ACK
	// timeout before the QP fails (at most 7).
	RetryCnt uint8
	// RNRRetry is how often a request is retried after an RNR NAK before
	// the QP fails; 7 means forever.
	RNRRetry uint8
}

// RNRRetryInfinite is the rnr_retry value that retries forever.
const RNRRetryInfinite = 7

// QP is a queue pair.
type QP interface {
	// QPN is the QP number.
	QPN() uint32
	// Type is the transport service.
	Type() QPType
	// Modify changes the attributes named by mask.
	Modify(attr *QPAttr, mask QPAttrMask) error
	// Query returns the current attributes.
	Query() (QPAttr, error)
	// PostSend posts one work request to the send queue.
	PostSend(wr *SendWR) error
	// PostRecv posts one work request to the receive queue.
	PostRecv(wr *RecvWR) error
	// Destroy releases the QP.
	Destroy() error
}

// SRQInitAttr describes an SRQ to create.
type SRQInitAttr struct {
	MaxWR  int
	MaxSGE int
	// Limit arms the SRQ-limit event at creation (0: not armed).
	Limit int
}

// SRQAttr are an SRQ's attributes.
type SRQAttr struct {
	MaxWR int
	Limit int // 0 when not armed
}

// SRQ is a shared receive queue.
type SRQ interface {
	// PostRecv posts one receive work request.
	PostRecv(wr *RecvWR) error
	// Arm sets srq_limit: when fewer than limit WQEs are posted, the device
	// raises EventSRQLimitReached once and disarms (ibv_modify_srq with
	// IBV_SRQ_LIMIT).
	Arm(limit int) error
	// Query returns the attributes.
	Query() (SRQAttr, error)
	// Destroy releases the SRQ.
	Destroy() error
}

// SGE is a scatter/gather entry (struct ibv_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Opcode is a send work request's operation (enum ibv_wr_opcode).
type Opcode uint8

// Send opcodes.
const (
	OpRDMAWrite    Opcode = 0
	OpRDMAWriteImm Opcode = 1
	OpSend         Opcode = 2
	OpSendImm      Opcode = 3
	OpRDMARead     Opcode = 4
)

var opcodeNames = map[Opcode]string{
	OpRDMAWrite: "RDMA_WRITE", OpRDMAWriteImm: "RDMA_WRITE_WITH_IMM", OpSend: "SEND", OpSendImm: "SEND_WITH_IMM", OpRDMARead: "RDMA_READ",
}

func (o Opcode) String() string { return enumName(opcodeNames, o, "Opcode") }

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1
	SendSignaled  SendFlags = 2
	SendSolicited SendFlags = 4
	SendInline    SendFlags = 8
)

// SendWR is a send work request (struct ibv_send_wr without the list
// link: post one at a time).
type SendWR struct {
	WRID   uint64
	Opcode Opcode
	Flags  SendFlags
	SG     []SGE
	Imm    uint32
	// RDMA: the remote address and key.
	RemoteAddr uint64
	RKey       uint32
	// UD: the destination.
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request.
type RecvWR struct {
	WRID uint64
	SG   []SGE
}

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus uint8

// Completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCGeneralErr     WCStatus = 21
)

var wcStatusNames = map[WCStatus]string{
	WCSuccess: "success", WCLocLenErr: "local length error", WCLocQPOpErr: "local QP operation error",
	WCLocProtErr: "local protection error", WCWRFlushErr: "work request flushed",
	WCBadRespErr: "bad response", WCLocAccessErr: "local access error",
	WCRemInvReqErr: "remote invalid request", WCRemAccessErr: "remote access error",
	WCRemOpErr: "remote operation error", WCRetryExcErr: "transport retry counter exceeded",
	WCRNRRetryExcErr: "RNR retry counter exceeded", WCFatalErr: "fatal error",
	WCGeneralErr: "general error",
}

func (s WCStatus) String() string { return enumName(wcStatusNames, s, "status") }

// WCOpcode says what a completion completes (enum ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// WCFlags are completion flags (enum ibv_wc_flags).
type WCFlags uint8

// Completion flags.
const (
	WCGRH     WCFlags = 1
	WCWithImm WCFlags = 2
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	Flags   WCFlags
	ByteLen uint32
	Imm     uint32
	QPN     uint32 // the local QP
	SrcQP   uint32 // UD: the sender's QP
	SLID    uint16 // UD: the sender's LID
	// VendorErr carries provider detail for error completions.
	VendorErr uint32
}

// AsyncEventType is an asynchronous event's type (enum ibv_event_type).
type AsyncEventType uint8

// Async event types (the values of enum ibv_event_type).
const (
	EventCQErr AsyncEventType = iota
	EventQPFatal
	EventQPReqErr
	EventQPAccessErr
	EventCommEst
	EventSQDrained
	_ // IBV_EVENT_PATH_MIG
	_ // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal
	EventPortActive
	EventPortErr
	_ // IBV_EVENT_LID_CHANGE
	_ // IBV_EVENT_PKEY_CHANGE
	_ // IBV_EVENT_SM_CHANGE
	EventSRQErr
	EventSRQLimitReached
	EventQPLastWQEReached
)

var eventNames = map[AsyncEventType]string{
	EventCQErr: "CQ error", EventQPFatal: "QP fatal", EventQPReqErr: "QP request error",
	EventQPAccessErr: "QP access error", EventCommEst: "communication established",
	EventSQDrained: "SQ drained", EventPortActive: "port active", EventPortErr: "port error",
	EventSRQErr: "SRQ error", EventSRQLimitReached: "SRQ limit reached",
	EventQPLastWQEReached: "QP last WQE reached", EventDeviceFatal: "device fatal",
}

func (t AsyncEventType) String() string { return enumName(eventNames, t, "event") }

// enumName is v's name in names, or kind(v) for a value without one.
func enumName[T ~uint8](names map[T]string, v T, kind string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("%s(%d)", kind, uint8(v))
}

// AsyncEvent is an asynchronous event (struct ibv_async_event).
type AsyncEvent struct {
	Type AsyncEventType
	QPN  uint32 // QP events
	Port uint8  // port events
	SRQ  SRQ    // SRQ events
	CQ   CQ     // CQ events
}

// AddrOf returns the virtual address of b's first byte (0 for an empty
// slice).
func AddrOf(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// rnrTimerTable is the IBA's encoding of min_rnr_timer (table 45): code
// 0 is 655.36 ms, codes 1..31 rise from 0.01 ms to 491.52 ms.
var rnrTimerTable = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRTimer returns the duration an RNR timer code stands for.
func RNRTimer(code uint8) time.Duration { return rnrTimerTable[code&31] }

// RNRTimerCode returns the smallest code whose timer is at least d
// (31, the longest but one, if d exceeds it).
func RNRTimerCode(d time.Duration) uint8 {
	best := uint8(31)
	for c := uint8(1); c < 32; c++ {
		if rnrTimerTable[c] >= d {
			return c
		}
	}
	return best
}

// AckTimeout returns the local ACK timeout a Timeout code stands for
// (4.096 µs × 2^code); code 0 means no timeout and returns 0.
func AckTimeout(code uint8) time.Duration {
	if code == 0 {
		return 0
	}
	return time.Duration(4096<<(code&31)) * time.Nanosecond
}
