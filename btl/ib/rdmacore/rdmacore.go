//go:build rdmacore && cgo

package rdmacore

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define GOBTL_MAX_SGE 4

typedef struct {
	struct ibv_send_wr wr;
	struct ibv_recv_wr rwr;
	struct ibv_sge sge[GOBTL_MAX_SGE];
} gobtl_wr;

static void gobtl_set_sge(gobtl_wr *w, int i, uint64_t addr, uint32_t len, uint32_t lkey) {
	w->sge[i].addr = addr;
	w->sge[i].length = len;
	w->sge[i].lkey = lkey;
}

static int gobtl_post_send(struct ibv_qp *qp, gobtl_wr *w, uint64_t wrid, int opcode, unsigned flags, int nsge,
		uint32_t imm, uint64_t raddr, uint32_t rkey, struct ibv_ah *ah, uint32_t rqpn, uint32_t rqkey) {
	struct ibv_send_wr *bad = NULL;
	memset(&w->wr, 0, sizeof w->wr);
	w->wr.wr_id = wrid;
	w->wr.opcode = (enum ibv_wr_opcode)opcode;
	w->wr.send_flags = flags;
	w->wr.sg_list = nsge ? w->sge : NULL;
	w->wr.num_sge = nsge;
	w->wr.imm_data = htobe32(imm);
	if (ah) {
		w->wr.wr.ud.ah = ah;
		w->wr.wr.ud.remote_qpn = rqpn;
		w->wr.wr.ud.remote_qkey = rqkey;
	} else {
		w->wr.wr.rdma.remote_addr = raddr;
		w->wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &w->wr, &bad);
}

static int gobtl_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, gobtl_wr *w, uint64_t wrid, int nsge) {
	struct ibv_recv_wr *bad = NULL;
	memset(&w->rwr, 0, sizeof w->rwr);
	w->rwr.wr_id = wrid;
	w->rwr.sg_list = nsge ? w->sge : NULL;
	w->rwr.num_sge = nsge;
	if (srq)
		return ibv_post_srq_recv(srq, &w->rwr, &bad);
	return ibv_post_recv(qp, &w->rwr, &bad);
}

static int gobtl_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) { return ibv_poll_cq(cq, n, wc); }
static int gobtl_req_notify_cq(struct ibv_cq *cq, int solicited) { return ibv_req_notify_cq(cq, solicited); }
static uint32_t gobtl_wc_imm(struct ibv_wc *wc) { return be32toh(wc->imm_data); }
static int gobtl_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) { return ibv_query_port(c, port, a); }
static struct ibv_mr *gobtl_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }
static uint64_t gobtl_guid(struct ibv_device *d) { return be64toh(ibv_get_device_guid(d)); }

static void gobtl_fill_ah(struct ibv_ah_attr *ah, uint16_t dlid, uint8_t sl, uint8_t port, int global, const uint8_t *dgid, uint8_t hop) {
	memset(ah, 0, sizeof *ah);
	ah->dlid = dlid;
	ah->sl = sl;
	ah->port_num = port;
	if (global) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, dgid, 16);
		ah->grh.hop_limit = hop ? hop : 64;
		ah->grh.sgid_index = 0;
	}
}

static void gobtl_ah_dgid(struct ibv_ah_attr *ah, uint8_t *out) { memcpy(out, ah->grh.dgid.raw, 16); }

static int gobtl_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// gobtl_async returns 1 with the next async event's fields (and acks it),
// 0 when none is pending.
static int gobtl_async(struct ibv_context *ctx, int *type, uint32_t *qpn, void **srq, void **cq, int *port) {
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		return 0;
	*type = ev.event_type;
	*qpn = 0; *srq = NULL; *cq = NULL; *port = 0;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		*qpn = ev.element.qp->qp_num; break;
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		*srq = ev.element.srq; break;
	case IBV_EVENT_CQ_ERR:
		*cq = ev.element.cq; break;
	case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE: case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		*port = ev.element.port_num; break;
	default: break;
	}
	ibv_ack_async_event(&ev);
	return 1;
}

static int gobtl_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq) {
	void *ctx;
	return ibv_get_cq_event(ch, cq, &ctx);
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

const maxSGE = C.GOBTL_MAX_SGE

// The verbs package's constants are libibverbs' values; these fail to
// compile if ever they differ.
var (
	_ = [1]int{}[uint32(verbs.QPTypeRC)-uint32(C.IBV_QPT_RC)]
	_ = [1]int{}[uint32(verbs.QPTypeUD)-uint32(C.IBV_QPT_UD)]
	_ = [1]int{}[uint32(verbs.OpRDMAWrite)-uint32(C.IBV_WR_RDMA_WRITE)]
	_ = [1]int{}[uint32(verbs.OpRDMAWriteImm)-uint32(C.IBV_WR_RDMA_WRITE_WITH_IMM)]
	_ = [1]int{}[uint32(verbs.OpSend)-uint32(C.IBV_WR_SEND)]
	_ = [1]int{}[uint32(verbs.OpSendImm)-uint32(C.IBV_WR_SEND_WITH_IMM)]
	_ = [1]int{}[uint32(verbs.OpRDMARead)-uint32(C.IBV_WR_RDMA_READ)]
	_ = [1]int{}[uint32(verbs.SendSignaled)-uint32(C.IBV_SEND_SIGNALED)]
	_ = [1]int{}[uint32(verbs.SendSolicited)-uint32(C.IBV_SEND_SOLICITED)]
	_ = [1]int{}[uint32(verbs.SendFence)-uint32(C.IBV_SEND_FENCE)]
	_ = [1]int{}[uint32(verbs.SendInline)-uint32(C.IBV_SEND_INLINE)]
	_ = [1]int{}[uint32(verbs.AccessLocalWrite)-uint32(C.IBV_ACCESS_LOCAL_WRITE)]
	_ = [1]int{}[uint32(verbs.AccessRemoteWrite)-uint32(C.IBV_ACCESS_REMOTE_WRITE)]
	_ = [1]int{}[uint32(verbs.AccessRemoteRead)-uint32(C.IBV_ACCESS_REMOTE_READ)]
	_ = [1]int{}[uint32(verbs.AccessRemoteAtomic)-uint32(C.IBV_ACCESS_REMOTE_ATOMIC)]
	_ = [1]int{}[uint32(verbs.QPErr)-uint32(C.IBV_QPS_ERR)]
	_ = [1]int{}[uint32(verbs.QPRTS)-uint32(C.IBV_QPS_RTS)]
	_ = [1]int{}[uint32(verbs.QPAttrDestQPN)-uint32(C.IBV_QP_DEST_QPN)]
	_ = [1]int{}[uint32(verbs.QPAttrMaxDestRdAtomic)-uint32(C.IBV_QP_MAX_DEST_RD_ATOMIC)]
	_ = [1]int{}[uint32(verbs.QPAttrMinRNRTimer)-uint32(C.IBV_QP_MIN_RNR_TIMER)]
	_ = [1]int{}[uint32(verbs.QPAttrAV)-uint32(C.IBV_QP_AV)]
	_ = [1]int{}[uint32(verbs.WCRetryExcErr)-uint32(C.IBV_WC_RETRY_EXC_ERR)]
	_ = [1]int{}[uint32(verbs.WCRNRRetryExcErr)-uint32(C.IBV_WC_RNR_RETRY_EXC_ERR)]
	_ = [1]int{}[uint32(verbs.WCGeneralErr)-uint32(C.IBV_WC_GENERAL_ERR)]
	_ = [1]int{}[uint32(verbs.WCRecvRDMAWithImm)-uint32(C.IBV_WC_RECV_RDMA_WITH_IMM)]
	_ = [1]int{}[uint32(verbs.WCRDMARead)-uint32(C.IBV_WC_RDMA_READ)]
	_ = [1]int{}[uint32(verbs.WCWithImm)-uint32(C.IBV_WC_WITH_IMM)]
	_ = [1]int{}[uint32(verbs.WCGRH)-uint32(C.IBV_WC_GRH)]
	_ = [1]int{}[uint32(verbs.EventSRQLimitReached)-uint32(C.IBV_EVENT_SRQ_LIMIT_REACHED)]
	_ = [1]int{}[uint32(verbs.EventQPLastWQEReached)-uint32(C.IBV_EVENT_QP_LAST_WQE_REACHED)]
	_ = [1]int{}[uint32(verbs.EventPortErr)-uint32(C.IBV_EVENT_PORT_ERR)]
	_ = [1]int{}[uint32(verbs.EventSQDrained)-uint32(C.IBV_EVENT_SQ_DRAINED)]
	_ = [1]int{}[uint32(verbs.EventDeviceFatal)-uint32(C.IBV_EVENT_DEVICE_FATAL)]
	_ = [1]int{}[uint32(verbs.EventSRQErr)-uint32(C.IBV_EVENT_SRQ_ERR)]
	_ = [1]int{}[uint32(verbs.MTU4096)-uint32(C.IBV_MTU_4096)]
	_ = [1]int{}[uint32(verbs.PortActive)-uint32(C.IBV_PORT_ACTIVE)]
)

func init() {
	verbs.RegisterProvider("rdmacore", func(string) (verbs.Provider, error) { return provider{}, nil })
}

func errnoErr(what string, rc C.int) error {
	e := syscall.Errno(-rc)
	if rc > 0 {
		e = syscall.Errno(rc)
	}
	return fmt.Errorf("rdmacore: %s: %w", what, e)
}

func lastErr(what string, err error) error {
	if err == nil {
		err = syscall.EINVAL
	}
	return fmt.Errorf("rdmacore: %s: %w", what, err)
}

// provider lists and opens the HCAs libibverbs sees.
type provider struct{}

func (provider) Name() string { return "rdmacore" }

func (provider) Devices() ([]verbs.DeviceInfo, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, lastErr("ibv_get_device_list", err)
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	out := make([]verbs.DeviceInfo, 0, int(n))
	for _, d := range devs {
		out = append(out, verbs.DeviceInfo{Name: C.GoString(C.ibv_get_device_name(d)), GUID: uint64(C.gobtl_guid(d))})
	}
	return out, nil
}

func (provider) Open(name string) (verbs.Device, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, lastErr("ibv_get_device_list", err)
	}
	defer C.ibv_free_device_list(list)
	for _, d := range unsafe.Slice(list, int(n)) {
		if C.GoString(C.ibv_get_device_name(d)) != name {
			continue
		}
		ctx, err := C.ibv_open_device(d)
		if ctx == nil {
			return nil, lastErr("ibv_open_device "+name, err)
		}
		if C.gobtl_nonblock(ctx.async_fd) != 0 {
			C.ibv_close_device(ctx)
			return nil, fmt.Errorf("rdmacore: %s: async fd not made non-blocking", name)
		}
		return &device{name: name, ctx: ctx, cqs: map[*C.struct_ibv_cq]*cq{}, srqs: map[*C.struct_ibv_srq]*srq{}}, nil
	}
	return nil, fmt.Errorf("rdmacore: no device %q: %w", name, verbs.ErrNoDevice)
}

// device is an open ibv_context.
type device struct {
	name string
	ctx  *C.struct_ibv_context
	mu   sync.Mutex
	cqs  map[*C.struct_ibv_cq]*cq
	srqs map[*C.struct_ibv_srq]*srq
}

func (d *device) Name() string { return d.name }

func (d *device) Query() (verbs.DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc := C.ibv_query_device(d.ctx, &a); rc != 0 {
		return verbs.DeviceAttr{}, errnoErr("ibv_query_device", rc)
	}
	return verbs.DeviceAttr{
		FWVer: C.GoString(&a.fw_ver[0]), NodeGUID: uint64(a.node_guid), VendorID: uint32(a.vendor_id),
		VendorPartID: uint32(a.vendor_part_id), PhysPortCnt: int(a.phys_port_cnt), MaxMRSize: uint64(a.max_mr_size),
		MaxQP: int(a.max_qp), MaxQPWR: int(a.max_qp_wr), MaxSGE: int(a.max_sge), MaxCQ: int(a.max_cq),
		MaxCQE: int(a.max_cqe), MaxMR: int(a.max_mr), MaxPD: int(a.max_pd), MaxQPRdAtom: int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom), MaxSRQ: int(a.max_srq), MaxSRQWR: int(a.max_srq_wr),
		MaxSRQSGE: int(a.max_srq_sge),
	}, nil
}

// portRate is the data rate in bytes/s of an active width and speed code.
func portRate(width, speed uint8) float64 {
	lanes := map[uint8]float64{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	// Gb/s per lane and the line code: 8b/10b up to QDR, 64b/66b above.
	type s struct{ gbps, code float64 }
	sp, ok := map[uint8]s{1: {2.5, 0.8}, 2: {5, 0.8}, 4: {10, 0.8}, 8: {10.3125, 64.0 / 66}, 16: {14.0625, 64.0 / 66},
		32: {25.78125, 64.0 / 66}, 64: {53.125, 64.0 / 66}, 128: {106.25, 64.0 / 66}}[speed]
	if !ok || lanes == 0 {
		return 0
	}
	return lanes * sp.gbps * sp.code * 1e9 / 8
}

func (d *device) QueryPort(port uint8) (verbs.PortAttr, error) {
	var a C.struct_ibv_port_attr
	if rc := C.gobtl_query_port(d.ctx, C.uint8_t(port), &a); rc != 0 {
		return verbs.PortAttr{}, errnoErr(fmt.Sprintf("ibv_query_port %d", port), rc)
	}
	var gid C.union_ibv_gid
	var g verbs.GID
	if rc := C.ibv_query_gid(d.ctx, C.uint8_t(port), 0, &gid); rc == 0 {
		copy(g[:], C.GoBytes(unsafe.Pointer(&gid), 16))
	}
	return verbs.PortAttr{
		State: verbs.PortState(a.state), MaxMTU: verbs.MTU(a.max_mtu), ActiveMTU: verbs.MTU(a.active_mtu),
		LID: uint16(a.lid), LMC: uint8(a.lmc), GID: g, LinkLayer: verbs.LinkLayer(a.link_layer),
		Rate: portRate(uint8(a.active_width), uint8(a.active_speed)),
	}, nil
}

func (d *device) AllocPD() (verbs.PD, error) {
	p, err := C.ibv_alloc_pd(d.ctx)
	if p == nil {
		return nil, lastErr("ibv_alloc_pd", err)
	}
	return &pd{d: d, p: p}, nil
}

func (d *device) PollAsyncEvent() (verbs.AsyncEvent, bool) {
	var typ, port C.int
	var qpn C.uint32_t
	var srqp, cqp unsafe.Pointer
	if C.gobtl_async(d.ctx, &typ, &qpn, &srqp, &cqp, &port) == 0 {
		return verbs.AsyncEvent{}, false
	}
	ev := verbs.AsyncEvent{Type: verbs.AsyncEventType(typ), QPN: uint32(qpn), Port: uint8(port)}
	d.mu.Lock()
	if s := d.srqs[(*C.struct_ibv_srq)(srqp)]; s != nil {
		ev.SRQ = s
	}
	if c := d.cqs[(*C.struct_ibv_cq)(cqp)]; c != nil {
		ev.CQ = c
	}
	d.mu.Unlock()
	return ev, true
}

func (d *device) Close() error {
	if rc := C.ibv_close_device(d.ctx); rc != 0 {
		return errnoErr("ibv_close_device", rc)
	}
	return nil
}

// ---- completion channels and CQs ----

// channel is an ibv_comp_channel whose non-blocking fd a goroutine waits
// on in the netpoller; it rings the doorbell when the fd turns readable
// and waits again once GetEvent has drained the events.
type channel struct {
	verbs.Doorbell
	d       *device
	ch      *C.struct_ibv_comp_channel
	f       *os.File
	drained chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (d *device) CreateCompChannel() (verbs.CompChannel, error) {
	c, err := C.ibv_create_comp_channel(d.ctx)
	if c == nil {
		return nil, lastErr("ibv_create_comp_channel", err)
	}
	if C.gobtl_nonblock(c.fd) != 0 {
		C.ibv_destroy_comp_channel(c)
		return nil, fmt.Errorf("rdmacore: completion channel fd not made non-blocking")
	}
	// A duplicate for Go's poller, so that closing the os.File leaves the
	// channel's own fd to libibverbs.
	dup, err := syscall.Dup(int(c.fd))
	if err != nil {
		C.ibv_destroy_comp_channel(c)
		return nil, fmt.Errorf("rdmacore: dup channel fd: %w", err)
	}
	ch := &channel{Doorbell: verbs.NewDoorbell(), d: d, ch: c, f: os.NewFile(uintptr(dup), "ibv-comp-channel"),
		drained: make(chan struct{}, 1), stop: make(chan struct{})}
	ch.wg.Add(1)
	go ch.wait()
	return ch, nil
}

func (ch *channel) wait() {
	defer ch.wg.Done()
	rc, err := ch.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		err := rc.Read(func(fd uintptr) bool {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(p, 0)
			return n > 0
		})
		if err != nil {
			return
		}
		ch.Wake()
		select {
		case <-ch.drained:
		case <-ch.stop:
			return
		}
	}
}

func (ch *channel) GetEvent() (verbs.CQ, bool) {
	var c *C.struct_ibv_cq
	if C.gobtl_get_cq_event(ch.ch, &c) != 0 {
		select {
		case ch.drained <- struct{}{}:
		default:
		}
		return nil, false
	}
	ch.d.mu.Lock()
	x := ch.d.cqs[c]
	ch.d.mu.Unlock()
	return x, x != nil
}

func (ch *channel) Destroy() error {
	close(ch.stop)
	ch.f.Close()
	ch.wg.Wait()
	if rc := C.ibv_destroy_comp_channel(ch.ch); rc != 0 {
		return errnoErr("ibv_destroy_comp_channel", rc)
	}
	return nil
}

// cq is an ibv_cq with a C array to poll into.
type cq struct {
	d   *device
	cq  *C.struct_ibv_cq
	wcs *C.struct_ibv_wc
	n   int
}

func (d *device) CreateCQ(cqe int, ch verbs.CompChannel) (verbs.CQ, error) {
	var cc *C.struct_ibv_comp_channel
	if ch != nil {
		x, ok := ch.(*channel)
		if !ok {
			return nil, fmt.Errorf("rdmacore: completion channel of another provider: %w", verbs.ErrInvalid)
		}
		cc = x.ch
	}
	c, err := C.ibv_create_cq(d.ctx, C.int(cqe), nil, cc, 0)
	if c == nil {
		return nil, lastErr(fmt.Sprintf("ibv_create_cq(%d)", cqe), err)
	}
	const batch = 64
	x := &cq{d: d, cq: c, n: batch, wcs: (*C.struct_ibv_wc)(C.calloc(batch, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{}))))}
	d.mu.Lock()
	d.cqs[c] = x
	d.mu.Unlock()
	return x, nil
}

func (c *cq) Poll(wc []verbs.WC) (int, error) {
	want := min(len(wc), c.n)
	n := C.gobtl_poll_cq(c.cq, C.int(want), c.wcs)
	if n < 0 {
		return 0, errnoErr("ibv_poll_cq", n)
	}
	src := unsafe.Slice(c.wcs, int(n))
	for i := range src {
		w := &src[i]
		wc[i] = verbs.WC{
			WRID: uint64(w.wr_id), Status: verbs.WCStatus(w.status), Opcode: verbs.WCOpcode(w.opcode),
			Flags: verbs.WCFlags(w.wc_flags), ByteLen: uint32(w.byte_len), Imm: uint32(C.gobtl_wc_imm(w)),
			QPN: uint32(w.qp_num), SrcQP: uint32(w.src_qp), SLID: uint16(w.slid), VendorErr: uint32(w.vendor_err),
		}
	}
	return int(n), nil
}

func (c *cq) ReqNotify(solicitedOnly bool) error {
	s := C.int(0)
	if solicitedOnly {
		s = 1
	}
	if rc := C.gobtl_req_notify_cq(c.cq, s); rc != 0 {
		return errnoErr("ibv_req_notify_cq", rc)
	}
	return nil
}

func (c *cq) AckEvents(n int) { C.ibv_ack_cq_events(c.cq, C.uint(n)) }

func (c *cq) Destroy() error {
	c.d.mu.Lock()
	delete(c.d.cqs, c.cq)
	c.d.mu.Unlock()
	if rc := C.ibv_destroy_cq(c.cq); rc != 0 {
		return errnoErr("ibv_destroy_cq", rc)
	}
	C.free(unsafe.Pointer(c.wcs))
	return nil
}

// ---- protection domains, regions, address handles ----

type pd struct {
	d *device
	p *C.struct_ibv_pd
}

// mr is a registered region; its Go memory is pinned while registered.
type mr struct {
	m      *C.struct_ibv_mr
	buf    []byte
	pinner runtime.Pinner
}

func (m *mr) Addr() uint64  { return uint64(uintptr(m.m.addr)) }
func (m *mr) Len() int      { return len(m.buf) }
func (m *mr) LKey() uint32  { return uint32(m.m.lkey) }
func (m *mr) RKey() uint32  { return uint32(m.m.rkey) }
func (m *mr) Bytes() []byte { return m.buf }

func (m *mr) Dereg() error {
	if m.m == nil {
		return nil
	}
	rc := C.ibv_dereg_mr(m.m)
	m.m = nil
	m.pinner.Unpin()
	if rc != 0 {
		return errnoErr("ibv_dereg_mr", rc)
	}
	return nil
}

func (p *pd) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("rdmacore: register an empty buffer: %w", verbs.ErrInvalid)
	}
	m := &mr{buf: buf}
	m.pinner.Pin(&buf[0])
	r, err := C.gobtl_reg_mr(p.p, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
	if r == nil {
		m.pinner.Unpin()
		return nil, lastErr(fmt.Sprintf("ibv_reg_mr(%d bytes)", len(buf)), err)
	}
	m.m = r
	return m, nil
}

type ah struct{ a *C.struct_ibv_ah }

func (a *ah) Destroy() error {
	if rc := C.ibv_destroy_ah(a.a); rc != 0 {
		return errnoErr("ibv_destroy_ah", rc)
	}
	return nil
}

func fillAH(dst *C.struct_ibv_ah_attr, a verbs.AHAttr) {
	g := C.int(0)
	if a.IsGlobal {
		g = 1
	}
	C.gobtl_fill_ah(dst, C.uint16_t(a.DLID), C.uint8_t(a.SL), C.uint8_t(a.PortNum), g, (*C.uint8_t)(unsafe.Pointer(&a.DGID[0])), C.uint8_t(a.HopLimit))
}

func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	var a C.struct_ibv_ah_attr
	fillAH(&a, attr)
	h, err := C.ibv_create_ah(p.p, &a)
	if h == nil {
		return nil, lastErr("ibv_create_ah", err)
	}
	return &ah{a: h}, nil
}

func (p *pd) Dealloc() error {
	if rc := C.ibv_dealloc_pd(p.p); rc != 0 {
		return errnoErr("ibv_dealloc_pd", rc)
	}
	return nil
}

// ---- shared receive queues ----

type srq struct {
	d  *device
	s  *C.struct_ibv_srq
	mu sync.Mutex
	w  *C.gobtl_wr
}

func (p *pd) CreateSRQ(attr verbs.SRQInitAttr) (verbs.SRQ, error) {
	var ia C.struct_ibv_srq_init_attr
	ia.attr.max_wr = C.uint32_t(attr.MaxWR)
	ia.attr.max_sge = C.uint32_t(max(1, attr.MaxSGE))
	ia.attr.srq_limit = C.uint32_t(attr.Limit)
	s, err := C.ibv_create_srq(p.p, &ia)
	if s == nil {
		return nil, lastErr("ibv_create_srq", err)
	}
	x := &srq{d: p.d, s: s, w: (*C.gobtl_wr)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gobtl_wr{}))))}
	p.d.mu.Lock()
	p.d.srqs[s] = x
	p.d.mu.Unlock()
	return x, nil
}

func (s *srq) PostRecv(wr *verbs.RecvWR) error {
	if len(wr.SG) > maxSGE {
		return fmt.Errorf("rdmacore: %d SGEs, at most %d: %w", len(wr.SG), maxSGE, verbs.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range wr.SG {
		C.gobtl_set_sge(s.w, C.int(i), C.uint64_t(e.Addr), C.uint32_t(e.Length), C.uint32_t(e.LKey))
	}
	if rc := C.gobtl_post_recv(nil, s.s, s.w, C.uint64_t(wr.WRID), C.int(len(wr.SG))); rc != 0 {
		return errnoErr("ibv_post_srq_recv", rc)
	}
	return nil
}

func (s *srq) Arm(limit int) error {
	var a C.struct_ibv_srq_attr
	a.srq_limit = C.uint32_t(limit)
	if rc := C.ibv_modify_srq(s.s, &a, C.IBV_SRQ_LIMIT); rc != 0 {
		return errnoErr("ibv_modify_srq", rc)
	}
	return nil
}

func (s *srq) Query() (verbs.SRQAttr, error) {
	var a C.struct_ibv_srq_attr
	if rc := C.ibv_query_srq(s.s, &a); rc != 0 {
		return verbs.SRQAttr{}, errnoErr("ibv_query_srq", rc)
	}
	return verbs.SRQAttr{MaxWR: int(a.max_wr), Limit: int(a.srq_limit)}, nil
}

func (s *srq) Destroy() error {
	s.d.mu.Lock()
	delete(s.d.srqs, s.s)
	s.d.mu.Unlock()
	if rc := C.ibv_destroy_srq(s.s); rc != 0 {
		return errnoErr("ibv_destroy_srq", rc)
	}
	C.free(unsafe.Pointer(s.w))
	return nil
}

// ---- queue pairs ----

type qp struct {
	q   *C.struct_ibv_qp
	typ verbs.QPType
	mu  sync.Mutex // guards the C work request (the BTL posts from one goroutine; tests may not)
	sw  *C.gobtl_wr
	rw  *C.gobtl_wr
}

func (p *pd) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	var ia C.struct_ibv_qp_init_attr
	scq, ok1 := attr.SendCQ.(*cq)
	rcq, ok2 := attr.RecvCQ.(*cq)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rdmacore: create QP needs CQs of this provider: %w", verbs.ErrInvalid)
	}
	ia.send_cq, ia.recv_cq = scq.cq, rcq.cq
	if attr.SRQ != nil {
		s, ok := attr.SRQ.(*srq)
		if !ok {
			return nil, fmt.Errorf("rdmacore: SRQ of another provider: %w", verbs.ErrInvalid)
		}
		ia.srq = s.s
	}
	ia.cap.max_send_wr = C.uint32_t(attr.Cap.MaxSendWR)
	ia.cap.max_recv_wr = C.uint32_t(attr.Cap.MaxRecvWR)
	ia.cap.max_send_sge = C.uint32_t(min(max(1, attr.Cap.MaxSendSGE), maxSGE))
	ia.cap.max_recv_sge = C.uint32_t(min(max(1, attr.Cap.MaxRecvSGE), maxSGE))
	ia.cap.max_inline_data = C.uint32_t(attr.Cap.MaxInlineData)
	ia.qp_type = C.enum_ibv_qp_type(attr.Type)
	if attr.SigAll {
		ia.sq_sig_all = 1
	}
	q, err := C.ibv_create_qp(p.p, &ia)
	if q == nil {
		return nil, lastErr("ibv_create_qp", err)
	}
	size := C.size_t(unsafe.Sizeof(C.gobtl_wr{}))
	return &qp{q: q, typ: attr.Type, sw: (*C.gobtl_wr)(C.calloc(1, size)), rw: (*C.gobtl_wr)(C.calloc(1, size))}, nil
}

func (q *qp) QPN() uint32        { return uint32(q.q.qp_num) }
func (q *qp) Type() verbs.QPType { return q.typ }

func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	var a C.struct_ibv_qp_attr
	a.qp_state = C.enum_ibv_qp_state(attr.State)
	a.pkey_index = C.uint16_t(attr.PKeyIndex)
	a.port_num = C.uint8_t(attr.Port)
	a.qkey = C.uint32_t(attr.QKey)
	a.qp_access_flags = C.uint(attr.AccessFlags)
	fillAH(&a.ah_attr, attr.AH)
	a.path_mtu = C.enum_ibv_mtu(attr.PathMTU)
	a.dest_qp_num = C.uint32_t(attr.DestQPN)
	a.rq_psn = C.uint32_t(attr.RQPSN)
	a.sq_psn = C.uint32_t(attr.SQPSN)
	a.max_dest_rd_atomic = C.uint8_t(attr.MaxDestRdAtomic)
	a.max_rd_atomic = C.uint8_t(attr.MaxRdAtomic)
	a.min_rnr_timer = C.uint8_t(attr.MinRNRTimer)
	a.timeout = C.uint8_t(attr.Timeout)
	a.retry_cnt = C.uint8_t(attr.RetryCnt)
	a.rnr_retry = C.uint8_t(attr.RNRRetry)
	if rc := C.ibv_modify_qp(q.q, &a, C.int(mask)); rc != 0 {
		return errnoErr(fmt.Sprintf("ibv_modify_qp to %v (mask %#x)", attr.State, uint32(mask)), rc)
	}
	return nil
}

func (q *qp) Query() (verbs.QPAttr, error) {
	var a C.struct_ibv_qp_attr
	var ia C.struct_ibv_qp_init_attr
	if rc := C.ibv_query_qp(q.q, &a, C.IBV_QP_STATE|C.IBV_QP_AV|C.IBV_QP_PATH_MTU|C.IBV_QP_DEST_QPN|C.IBV_QP_RQ_PSN|
		C.IBV_QP_SQ_PSN|C.IBV_QP_TIMEOUT|C.IBV_QP_RETRY_CNT|C.IBV_QP_RNR_RETRY|C.IBV_QP_MIN_RNR_TIMER|
		C.IBV_QP_MAX_QP_RD_ATOMIC|C.IBV_QP_MAX_DEST_RD_ATOMIC|C.IBV_QP_PORT|C.IBV_QP_QKEY|C.IBV_QP_ACCESS_FLAGS, &ia); rc != 0 {
		return verbs.QPAttr{}, errnoErr("ibv_query_qp", rc)
	}
	out := verbs.QPAttr{
		State: verbs.QPState(a.qp_state), PKeyIndex: uint16(a.pkey_index), Port: uint8(a.port_num), QKey: uint32(a.qkey),
		AccessFlags: verbs.Access(a.qp_access_flags), PathMTU: verbs.MTU(a.path_mtu), DestQPN: uint32(a.dest_qp_num),
		RQPSN: uint32(a.rq_psn), SQPSN: uint32(a.sq_psn), MaxDestRdAtomic: uint8(a.max_dest_rd_atomic),
		MaxRdAtomic: uint8(a.max_rd_atomic), MinRNRTimer: uint8(a.min_rnr_timer), Timeout: uint8(a.timeout),
		RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry),
		AH: verbs.AHAttr{DLID: uint16(a.ah_attr.dlid), SL: uint8(a.ah_attr.sl), PortNum: uint8(a.ah_attr.port_num), IsGlobal: a.ah_attr.is_global != 0},
	}
	C.gobtl_ah_dgid(&a.ah_attr, (*C.uint8_t)(unsafe.Pointer(&out.AH.DGID[0])))
	return out, nil
}

func (q *qp) PostSend(wr *verbs.SendWR) error {
	if len(wr.SG) > maxSGE {
		return fmt.Errorf("rdmacore: %d SGEs, at most %d: %w", len(wr.SG), maxSGE, verbs.ErrInvalid)
	}
	var h *C.struct_ibv_ah
	if wr.AH != nil {
		a, ok := wr.AH.(*ah)
		if !ok {
			return fmt.Errorf("rdmacore: address handle of another provider: %w", verbs.ErrInvalid)
		}
		h = a.a
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range wr.SG {
		C.gobtl_set_sge(q.sw, C.int(i), C.uint64_t(e.Addr), C.uint32_t(e.Length), C.uint32_t(e.LKey))
	}
	rc := C.gobtl_post_send(q.q, q.sw, C.uint64_t(wr.WRID), C.int(wr.Opcode), C.uint(wr.Flags), C.int(len(wr.SG)),
		C.uint32_t(wr.Imm), C.uint64_t(wr.RemoteAddr), C.uint32_t(wr.RKey), h, C.uint32_t(wr.RemoteQPN), C.uint32_t(wr.RemoteQKey))
	if rc != 0 {
		return errnoErr("ibv_post_send", rc)
	}
	return nil
}

func (q *qp) PostRecv(wr *verbs.RecvWR) error {
	if len(wr.SG) > maxSGE {
		return fmt.Errorf("rdmacore: %d SGEs, at most %d: %w", len(wr.SG), maxSGE, verbs.ErrInvalid)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range wr.SG {
		C.gobtl_set_sge(q.rw, C.int(i), C.uint64_t(e.Addr), C.uint32_t(e.Length), C.uint32_t(e.LKey))
	}
	if rc := C.gobtl_post_recv(q.q, nil, q.rw, C.uint64_t(wr.WRID), C.int(len(wr.SG))); rc != 0 {
		return errnoErr("ibv_post_recv", rc)
	}
	return nil
}

func (q *qp) Destroy() error {
	if rc := C.ibv_destroy_qp(q.q); rc != 0 {
		return errnoErr("ibv_destroy_qp", rc)
	}
	C.free(unsafe.Pointer(q.sw))
	C.free(unsafe.Pointer(q.rw))
	return nil
}
