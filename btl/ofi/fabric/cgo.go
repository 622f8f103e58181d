//go:build ofi && cgo

package fabric

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

// libfabric is loaded when the package is first used (gobtl_load), not
// linked: loading it loads every provider's libraries with it, and one
// of Debian's (libinfinipath, under the psm provider) sleeps ~200 ms in
// its constructor — every gobtl process paid that at start, ofi or not.
// libfabric exports six functions this package calls; everything else
// is inline in its headers, through the objects' operation tables. Each
// has the type of its declaration in the headers, and the names below
// stand for the loaded ones.
static __typeof__(fi_getinfo) *gobtl_p_getinfo;
static __typeof__(fi_freeinfo) *gobtl_p_freeinfo;
static __typeof__(fi_dupinfo) *gobtl_p_dupinfo;
static __typeof__(fi_fabric) *gobtl_p_fabric;
static __typeof__(fi_strerror) *gobtl_p_strerror;
static __typeof__(fi_tostr) *gobtl_p_tostr;
#define fi_getinfo gobtl_p_getinfo
#define fi_freeinfo gobtl_p_freeinfo
#define fi_dupinfo gobtl_p_dupinfo
#define fi_fabric gobtl_p_fabric
#define fi_strerror gobtl_p_strerror
#define fi_tostr gobtl_p_tostr

// gobtl_load opens the library name (found as the dynamic linker finds
// it: LD_LIBRARY_PATH, ld.so.cache) and resolves the six; on failure it
// writes why to err and leaves them as they were.
static int gobtl_load(const char *name, char *err, size_t n) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, n, "%s", dlerror());
		return -1;
	}
	struct { void **p; const char *name; } syms[] = {
		{(void **)&gobtl_p_getinfo, "fi_getinfo"}, {(void **)&gobtl_p_freeinfo, "fi_freeinfo"},
		{(void **)&gobtl_p_dupinfo, "fi_dupinfo"}, {(void **)&gobtl_p_fabric, "fi_fabric"},
		{(void **)&gobtl_p_strerror, "fi_strerror"}, {(void **)&gobtl_p_tostr, "fi_tostr"},
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if (!dlsym(h, syms[i].name)) {
			snprintf(err, n, "%s: no %s", name, syms[i].name);
			dlclose(h);
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) *syms[i].p = dlsym(h, syms[i].name);
	return 0;
}

static void gobtl_freeinfo(struct fi_info *i) { fi_freeinfo(i); }
static struct fi_info *gobtl_dupinfo(const struct fi_info *i) { return fi_dupinfo(i); }
static const char *gobtl_strerror(int e) { return fi_strerror(e); }

// The helpers below keep libfabric's function-pointer tables, its macros
// and every void *context on the C side: Go passes integers for contexts
// (cast here, never a Go pointer kept by C) and gets plain values back.

#define GOBTL_VERSION FI_VERSION(1, 17)

static void gobtl_init_env(void) {
	// libfabric's MR cache cannot see Go's frees (see doc.go).
	setenv("FI_MR_CACHE_MONITOR", "disabled", 1);
	// The sockets provider's progress thread spins 10 ms (per endpoint)
	// before it sleeps; on a loaded host the spinning threads starve the
	// ranks (9 ms round trips on two cores). Unless the user says.
	setenv("FI_SOCKETS_PE_WAITTIME", "0", 0);
}

static int gobtl_getinfo(const char *prov, const char *domain, const char *node, uint64_t caps,
		uint64_t op_flags, uint64_t order, int mr_mode, int threading, int ep_type, int progress,
		size_t rx_size, size_t tx_size, struct fi_info **out) {
	struct fi_info *h = fi_dupinfo(NULL); // fi_allocinfo(), whose inline body would need the linked symbol
	if (!h) return -FI_ENOMEM;
	h->ep_attr->type = ep_type;
	h->caps = caps;
	// mode 0: contexts are integers, never memory the provider may use
	// (FI_CONTEXT), and no message prefix.
	h->mode = 0;
	h->addr_format = FI_FORMAT_UNSPEC;
	if (prov && *prov) h->fabric_attr->prov_name = strdup(prov);
	if (domain && *domain) h->domain_attr->name = strdup(domain);
	h->domain_attr->mr_mode = mr_mode;
	h->domain_attr->threading = threading;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->tx_attr->op_flags = op_flags;
	h->tx_attr->msg_order = order;
	h->rx_attr->msg_order = order;
	h->domain_attr->data_progress = progress;
	h->rx_attr->size = rx_size;
	h->tx_attr->size = tx_size;
	int rc = fi_getinfo(GOBTL_VERSION, (node && *node) ? node : NULL, NULL, 0, h, out);
	fi_freeinfo(h);
	return rc;
}

// gobtl_open makes the objects of one module: fabric, domain, a table AV,
// a CQ (with an fd to wait on when want_wait and the provider has one)
// and an enabled RDM endpoint bound to both.
static int gobtl_open(struct fi_info *info, size_t cq_size, int want_wait, size_t min_multi,
		struct fid_fabric **f, struct fid_domain **d, struct fid_av **av, struct fid_cq **cq,
		struct fid_ep **ep, int *wait_fd, const char **where) {
	int rc;
	*f = NULL; *d = NULL; *av = NULL; *cq = NULL; *ep = NULL; *wait_fd = -1;
	*where = "fi_fabric";
	if ((rc = fi_fabric(info->fabric_attr, f, NULL))) goto fail;
	*where = "fi_domain";
	if ((rc = fi_domain(*f, info, d, NULL))) goto fail;
	struct fi_av_attr aa = {0};
	aa.type = FI_AV_TABLE;
	*where = "fi_av_open";
	if ((rc = fi_av_open(*d, &aa, av, NULL))) goto fail;
	struct fi_cq_attr ca = {0};
	ca.format = FI_CQ_FORMAT_TAGGED;
	ca.size = cq_size;
	ca.wait_obj = want_wait ? FI_WAIT_FD : FI_WAIT_NONE;
	*where = "fi_cq_open";
	rc = fi_cq_open(*d, &ca, cq, NULL);
	if (rc == 0 && want_wait && fi_control(&(*cq)->fid, FI_GETWAIT, wait_fd) != 0) {
		fi_close(&(*cq)->fid);
		*cq = NULL;
		*wait_fd = -1;
		rc = -FI_ENOSYS;
	}
	if (rc && want_wait) {
		// No fd to wait on (shm, rxd): a CQ that is polled only.
		ca.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(*d, &ca, cq, NULL);
	}
	if (rc) goto fail;
	*where = "fi_endpoint";
	if ((rc = fi_endpoint(*d, info, ep, NULL))) goto fail;
	// Some providers (sockets) take the option only before fi_enable.
	*where = "fi_setopt(FI_OPT_MIN_MULTI_RECV)";
	if (min_multi && (rc = fi_setopt(&(*ep)->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_multi, sizeof min_multi))) goto fail;
	*where = "fi_ep_bind(av)";
	if ((rc = fi_ep_bind(*ep, &(*av)->fid, 0))) goto fail;
	*where = "fi_ep_bind(cq)";
	if ((rc = fi_ep_bind(*ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV))) goto fail;
	*where = "fi_enable";
	if ((rc = fi_enable(*ep))) goto fail;
	return 0;
fail:
	if (*ep) fi_close(&(*ep)->fid);
	if (*cq) fi_close(&(*cq)->fid);
	if (*av) fi_close(&(*av)->fid);
	if (*d) fi_close(&(*d)->fid);
	if (*f) fi_close(&(*f)->fid);
	*ep = NULL; *cq = NULL; *av = NULL; *d = NULL; *f = NULL;
	return rc;
}

static int gobtl_close(struct fid_fabric *f, struct fid_domain *d, struct fid_av *av, struct fid_cq *cq, struct fid_ep *ep) {
	int rc = 0, r;
	if (ep && (r = fi_close(&ep->fid)) && !rc) rc = r;
	if (cq && (r = fi_close(&cq->fid)) && !rc) rc = r;
	if (av && (r = fi_close(&av->fid)) && !rc) rc = r;
	if (d && (r = fi_close(&d->fid)) && !rc) rc = r;
	if (f && (r = fi_close(&f->fid)) && !rc) rc = r;
	return rc;
}

static int gobtl_getname(struct fid_ep *ep, void *buf, size_t *len) { return fi_getname(&ep->fid, buf, len); }

static int gobtl_av_insert(struct fid_av *av, const void *addr, uint64_t *out) {
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int rc = fi_av_insert(av, addr, 1, &a, 0, NULL);
	*out = a;
	if (rc == 1) return 0;
	return rc < 0 ? rc : -FI_EADDRNOTAVAIL;
}

static int gobtl_av_remove(struct fid_av *av, uint64_t a) {
	fi_addr_t x = a;
	return fi_av_remove(av, &x, 1, 0);
}

static const char *gobtl_av_straddr(struct fid_av *av, const void *addr, char *buf, size_t *len) {
	return fi_av_straddr(av, addr, buf, len);
}

static ssize_t gobtl_tsenddata(struct fid_ep *ep, void *buf, size_t len, void *desc, uint64_t data,
		uint64_t dest, uint64_t tag, uint64_t ctx) {
	return fi_tsenddata(ep, buf, len, desc, data, dest, tag, (void *)(uintptr_t)ctx);
}

static ssize_t gobtl_tinjectdata(struct fid_ep *ep, void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t tag) {
	return fi_tinjectdata(ep, buf, len, data, dest, tag);
}

static ssize_t gobtl_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, uint64_t src,
		uint64_t tag, uint64_t ignore, uint64_t ctx) {
	return fi_trecv(ep, buf, len, desc, src, tag, ignore, (void *)(uintptr_t)ctx);
}

static ssize_t gobtl_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, uint64_t src, uint64_t ctx) {
	return fi_recv(ep, buf, len, desc, src, (void *)(uintptr_t)ctx);
}

static ssize_t gobtl_senddata(struct fid_ep *ep, void *buf, size_t len, void *desc, uint64_t data,
		uint64_t dest, uint64_t ctx) {
	return fi_senddata(ep, buf, len, desc, data, dest, (void *)(uintptr_t)ctx);
}

static ssize_t gobtl_injectdata(struct fid_ep *ep, void *buf, size_t len, uint64_t data, uint64_t dest) {
	return fi_injectdata(ep, buf, len, data, dest);
}

// gobtl_recv_multi posts buf as one multi-receive buffer: messages are
// packed into it until less than the endpoint's minimum is left.
static ssize_t gobtl_recv_multi(struct fid_ep *ep, void *buf, size_t len, void *desc, uint64_t ctx) {
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg msg = {0};
	msg.msg_iov = &iov;
	msg.desc = &desc;
	msg.iov_count = 1;
	msg.addr = FI_ADDR_UNSPEC;
	msg.context = (void *)(uintptr_t)ctx;
	return fi_recvmsg(ep, &msg, FI_MULTI_RECV | FI_COMPLETION);
}

static ssize_t gobtl_rma(struct fid_ep *ep, int write, void *buf, size_t len, void *desc, uint64_t peer,
		uint64_t addr, uint64_t key, uint64_t ctx, uint64_t flags) {
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct fi_msg_rma msg = {0};
	msg.msg_iov = &iov;
	msg.desc = &desc;
	msg.iov_count = 1;
	msg.addr = peer;
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	msg.context = (void *)(uintptr_t)ctx;
	flags |= FI_COMPLETION;
	return write ? fi_writemsg(ep, &msg, flags) : fi_readmsg(ep, &msg, flags);
}

// gobtl_cq_read reads up to n completions into ents.
static ssize_t gobtl_cq_read(struct fid_cq *cq, struct fi_cq_tagged_entry *ents, size_t n) {
	return fi_cq_read(cq, ents, n);
}

static ssize_t gobtl_cq_readerr(struct fid_cq *cq, uint64_t *ctx, uint64_t *flags, uint64_t *len, int *err,
		int *prov_errno, uint64_t *tag, char *msg, size_t msglen) {
	struct fi_cq_err_entry e = {0};
	ssize_t rc = fi_cq_readerr(cq, &e, 0);
	if (rc < 0) return rc;
	*ctx = (uint64_t)(uintptr_t)e.op_context;
	*flags = e.flags;
	*len = e.len;
	*err = e.err < 0 ? -e.err : e.err; // shm reports it negative
	*prov_errno = e.prov_errno;
	*tag = e.tag;
	const char *s = fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0);
	if (!s) s = fi_strerror(e.err);
	strncpy(msg, s ? s : "", msglen - 1);
	msg[msglen - 1] = 0;
	return rc;
}

static int gobtl_trywait(struct fid_fabric *f, struct fid_cq *cq) {
	struct fid *fids[1] = { &cq->fid };
	return fi_trywait(f, fids, 1);
}

static int gobtl_mr_reg(struct fid_domain *d, struct fid_ep *ep, int bind_ep, void *buf, size_t len,
		uint64_t access, uint64_t key, struct fid_mr **mr, uint64_t *key_out, void **desc) {
	int rc = fi_mr_reg(d, buf, len, access, 0, key, 0, mr, NULL);
	if (rc) return rc;
	if (bind_ep) {
		if ((rc = fi_mr_bind(*mr, &ep->fid, 0)) || (rc = fi_mr_enable(*mr))) {
			fi_close(&(*mr)->fid);
			*mr = NULL;
			return rc;
		}
	}
	*key_out = fi_mr_key(*mr);
	*desc = fi_mr_desc(*mr);
	return 0;
}

static int gobtl_mr_close(struct fid_mr *mr) { return fi_close(&mr->fid); }

static const char *gobtl_tostr_caps(uint64_t *caps) { return fi_tostr(caps, FI_TYPE_CAPS); }
static const char *gobtl_tostr_mr_mode(int *m) { return fi_tostr(m, FI_TYPE_MR_MODE); }
static const char *gobtl_tostr_order(uint64_t *o) { return fi_tostr(o, FI_TYPE_MSG_ORDER); }
static const char *gobtl_tostr_op_flags(uint64_t *o) { return fi_tostr(o, FI_TYPE_OP_FLAGS); }
static const char *gobtl_tostr_addr_format(uint32_t *a) { return fi_tostr(a, FI_TYPE_ADDR_FORMAT); }
static const char *gobtl_tostr_ep_type(enum fi_ep_type *t) { return fi_tostr(t, FI_TYPE_EP_TYPE); }
static const char *gobtl_tostr_progress(enum fi_progress *p) { return fi_tostr(p, FI_TYPE_PROGRESS); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Available reports whether this build has libfabric.
const Available = true

// Errno is a libfabric error code (the positive FI_E* value).
type Errno int

func (e Errno) Error() string {
	if Init() != nil {
		return fmt.Sprintf("libfabric error %d", int(e))
	}
	return C.GoString(C.gobtl_strerror(C.int(e)))
}

// Error codes callers branch on.
const (
	// ErrAgain: the operation cannot start now (a full queue, no
	// completion to read); progress and retry.
	ErrAgain Errno = C.FI_EAGAIN
	// ErrAvail: an error completion waits to be read with ReadErr.
	ErrAvail Errno = C.FI_EAVAIL
	// ErrNoData: fi_getinfo found nothing matching the hints.
	ErrNoData Errno = C.FI_ENODATA
	// ErrCanceled: an operation flushed at close.
	ErrCanceled Errno = C.FI_ECANCELED
	// ErrTruncated: a message longer than the buffer it landed in.
	ErrTruncated Errno = C.FI_ETRUNC
	// ErrNoKey: a requested registration key is taken.
	ErrNoKey Errno = C.FI_ENOKEY
	// ErrNoMem: the provider is out of an internal resource (shm's
	// receive entries, when a receive is posted).
	ErrNoMem Errno = C.FI_ENOMEM
)

func errno(rc C.ssize_t) error {
	if rc >= 0 {
		return nil
	}
	return Errno(-rc)
}

func ierrno(rc C.int) error { return errno(C.ssize_t(rc)) }

// Capability and access bits (fabric.h), for Hints.Caps, MR access and
// completion flags.
const (
	CapMsg          uint64 = C.FI_MSG
	CapRMA          uint64 = C.FI_RMA
	CapTagged       uint64 = C.FI_TAGGED
	CapMultiRecv    uint64 = C.FI_MULTI_RECV
	CapSource       uint64 = C.FI_SOURCE
	CapDirectedRecv uint64 = C.FI_DIRECTED_RECV
	AccessSend      uint64 = C.FI_SEND
	AccessRecv      uint64 = C.FI_RECV
	AccessRead      uint64 = C.FI_READ
	AccessWrite     uint64 = C.FI_WRITE
	AccessRemRead   uint64 = C.FI_REMOTE_READ
	AccessRemWrite  uint64 = C.FI_REMOTE_WRITE
	// FlagRecv, FlagSend, FlagRead, FlagWrite, FlagTagged and
	// FlagMultiRecv appear in Completion.Flags; FlagMultiRecv on a receive
	// says the provider has released its multi-receive buffer.
	FlagRecv      uint64 = C.FI_RECV
	FlagSend      uint64 = C.FI_SEND
	FlagRead      uint64 = C.FI_READ
	FlagWrite     uint64 = C.FI_WRITE
	FlagTagged    uint64 = C.FI_TAGGED
	FlagMultiRecv uint64 = C.FI_MULTI_RECV
	FlagRemoteCQ  uint64 = C.FI_REMOTE_CQ_DATA
	// DeliveryComplete is the operation flag asking that a completion
	// mean the data is visible at the target.
	DeliveryComplete uint64 = C.FI_DELIVERY_COMPLETE
)

// Message orders (msg_order), for Hints.Order.
const (
	OrderSAS uint64 = C.FI_ORDER_SAS // sends in the order submitted
	OrderSAW uint64 = C.FI_ORDER_SAW // a send after a write stays after it
	OrderRAW uint64 = C.FI_ORDER_RAW
	OrderWAW uint64 = C.FI_ORDER_WAW
)

// MR modes (mr_mode) a domain may ask for.
const (
	MRLocal    = int(C.FI_MR_LOCAL)
	MRVirtAddr = int(C.FI_MR_VIRT_ADDR)
	MRAlloc    = int(C.FI_MR_ALLOCATED)
	MRProvKey  = int(C.FI_MR_PROV_KEY)
	MREndpoint = int(C.FI_MR_ENDPOINT)
	MRRaw      = int(C.FI_MR_RAW)
	MRHMem     = int(C.FI_MR_HMEM)
	// MRSupported are the modes this layer can honour: local descriptors,
	// virtual addresses, allocated memory, provider keys and keys bound
	// to an endpoint; raw keys longer than 64 bits are not.
	MRSupported = MRLocal | MRVirtAddr | MRAlloc | MRProvKey | MREndpoint
)

// AddrUnspec is FI_ADDR_UNSPEC: a receive from any source.
const AddrUnspec Addr = Addr(C.FI_ADDR_UNSPEC)

// Addr is a peer's fi_addr_t in an endpoint's address vector.
type Addr uint64

var (
	initOnce sync.Once
	initErr  error
)

// ErrNoLibrary reports that libfabric.so.1 could not be loaded: a build
// with the ofi tag loads it when the package is first used.
var ErrNoLibrary = errors.New("fabric: libfabric cannot be loaded (install libfabric1, or put libfabric.so.1 on LD_LIBRARY_PATH)")

// Init prepares libfabric's environment and then loads it, once; every
// entry point calls it. libfabric is loaded here, not linked, so that a
// process that never uses it does not load it and the libraries of all
// its providers (cgo.go's preamble says what that cost).
func Init() error {
	initOnce.Do(func() {
		C.gobtl_init_env()
		initErr = load(libName)
	})
	return initErr
}

// libName is the soname of the library libfabric-dev links against.
const libName = "libfabric.so.1"

// load loads the library name and takes libfabric's entry points from it.
func load(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [512]C.char
	if C.gobtl_load(cname, &msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("%w: %s", ErrNoLibrary, C.GoString(&msg[0]))
	}
	return nil
}

// Threading models for Hints.Threading.
const (
	ThreadDomain = int(C.FI_THREAD_DOMAIN)
	ThreadSafe   = int(C.FI_THREAD_SAFE)
)

// Hints select providers and what they must offer (fi_getinfo's hints).
// The zero value asks for any reliable-datagram endpoint.
type Hints struct {
	// Provider names a provider, "tcp" matching "tcp;ofi_rxm" as
	// FI_PROVIDER does; empty: any.
	Provider string
	// Domain names a domain (a NIC: "eth0", "lo", "mlx5_0"); empty: any.
	Domain string
	// Fabric names a fabric ("127.0.0.1/32", "192.0.2.0/24"); empty: any.
	Fabric string
	// Node is an address or host name to bind to; empty: the provider's.
	Node string
	// Caps are the capabilities required.
	Caps uint64
	// OpFlags are default operation flags (DeliveryComplete).
	OpFlags uint64
	// Order is the message order required (OrderSAS, ...).
	Order uint64
	// MRMode is the set of MR modes the caller can honour; 0 asks for
	// MRSupported.
	MRMode int
	// Threading: 0 asks for ThreadDomain (the caller serializes).
	Threading int
	// AnyEPType lists every endpoint type instead of FI_EP_RDM alone.
	AnyEPType bool
	// AutoProgress asks for a provider that moves data without being
	// called (FI_PROGRESS_AUTO): a one-sided operation completes while
	// its target computes.
	AutoProgress bool
	// RxSize and TxSize ask for receive and transmit queues at least this
	// deep; 0: the provider's.
	RxSize, TxSize int
}

// ProgressAuto is Info.DataProgress of a provider that progresses by
// itself.
const ProgressAuto = "FI_PROGRESS_AUTO"

// Info describes one provider/domain pairing fi_getinfo returned. The
// fields are copies; the C description behind them lives until the List
// that holds it is freed.
type Info struct {
	Provider, Fabric, Domain string
	EPType, AddrFormat       string
	Caps                     uint64
	CapsString               string
	MRMode                   int
	MRModeString             string
	OpFlags, Order           uint64
	OrderString              string
	InjectSize               int
	TxSize, RxSize           int
	MaxMsgSize               uint64
	MRKeySize, CQDataSize    int
	DataProgress             string
	// Auth is the provider's authorization-key size (cxi, efa): nonzero
	// when jobs can be fenced off by the fabric itself.
	AuthKeySize int
	c           *C.struct_fi_info
}

// List is the result of GetInfo: free it once done with its Infos.
type List struct {
	Infos []Info
	head  *C.struct_fi_info
}

// Free releases the C descriptions.
func (l *List) Free() {
	if l.head != nil {
		C.gobtl_freeinfo(l.head)
		l.head = nil
	}
}

// GetInfo asks libfabric for what matches h. No match is an error
// wrapping ErrNoData.
func GetInfo(h Hints) (*List, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	cs := func(s string) *C.char {
		if s == "" {
			return nil
		}
		return C.CString(s)
	}
	prov, dom, node := cs(h.Provider), cs(h.Domain), cs(h.Node)
	defer C.free(unsafe.Pointer(prov))
	defer C.free(unsafe.Pointer(dom))
	defer C.free(unsafe.Pointer(node))
	mr := h.MRMode
	if mr == 0 {
		mr = MRSupported
	}
	thr := h.Threading
	if thr == 0 {
		thr = ThreadDomain
	}
	ept := C.int(C.FI_EP_RDM)
	if h.AnyEPType {
		ept = C.FI_EP_UNSPEC
	}
	prog := C.int(C.FI_PROGRESS_UNSPEC)
	if h.AutoProgress {
		prog = C.FI_PROGRESS_AUTO
	}
	var head *C.struct_fi_info
	rc := C.gobtl_getinfo(prov, dom, node, C.uint64_t(h.Caps), C.uint64_t(h.OpFlags), C.uint64_t(h.Order),
		C.int(mr), C.int(thr), ept, prog, C.size_t(h.RxSize), C.size_t(h.TxSize), &head)
	if rc != 0 {
		return nil, fmt.Errorf("fi_getinfo(provider %q, domain %q): %w", h.Provider, h.Domain, Errno(-rc))
	}
	// Providers layered by a utility provider (tcp under ofi_rxm) ignore
	// the domain's name and list each pairing once per core provider that
	// offers it: filter and deduplicate here.
	l := &List{head: head}
	seen := map[string]bool{}
	for i := head; i != nil; i = i.next {
		in := describe(i)
		k := in.Provider + "\x00" + in.Fabric + "\x00" + in.Domain + "\x00" + in.AddrFormat
		if seen[k] || (h.Domain != "" && in.Domain != h.Domain) || (h.Fabric != "" && in.Fabric != h.Fabric) {
			continue
		}
		seen[k] = true
		l.Infos = append(l.Infos, in)
	}
	if len(l.Infos) == 0 {
		l.Free()
		return nil, fmt.Errorf("fi_getinfo(provider %q, domain %q, fabric %q): %w", h.Provider, h.Domain, h.Fabric, ErrNoData)
	}
	return l, nil
}

func describe(i *C.struct_fi_info) Info {
	in := Info{
		Caps: uint64(i.caps), MRMode: int(i.domain_attr.mr_mode),
		OpFlags: uint64(i.tx_attr.op_flags), Order: uint64(i.tx_attr.msg_order),
		InjectSize: int(i.tx_attr.inject_size), TxSize: int(i.tx_attr.size), RxSize: int(i.rx_attr.size),
		MaxMsgSize: uint64(i.ep_attr.max_msg_size), MRKeySize: int(i.domain_attr.mr_key_size),
		CQDataSize: int(i.domain_attr.cq_data_size), AuthKeySize: int(i.domain_attr.auth_key_size), c: i,
	}
	in.Provider = C.GoString(i.fabric_attr.prov_name)
	in.Fabric = C.GoString(i.fabric_attr.name)
	in.Domain = C.GoString(i.domain_attr.name)
	caps := C.uint64_t(i.caps)
	in.CapsString = tostr(C.gobtl_tostr_caps(&caps))
	mr := C.int(i.domain_attr.mr_mode)
	in.MRModeString = tostr(C.gobtl_tostr_mr_mode(&mr))
	order := C.uint64_t(i.tx_attr.msg_order)
	in.OrderString = tostr(C.gobtl_tostr_order(&order))
	af := C.uint32_t(i.addr_format)
	in.AddrFormat = tostr(C.gobtl_tostr_addr_format(&af))
	ept := i.ep_attr._type
	in.EPType = tostr(C.gobtl_tostr_ep_type(&ept))
	prog := i.domain_attr.data_progress
	in.DataProgress = tostr(C.gobtl_tostr_progress(&prog))
	return in
}

// tostr turns fi_tostr's "FI_A | FI_B" into "FI_A|FI_B".
func tostr(s *C.char) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(C.GoString(s), " | ", "|")), " ")
}

// Options shape an endpoint's objects.
type Options struct {
	// CQSize is the completion queue's depth; 0: the provider's default.
	CQSize int
	// Wait asks for a CQ with a file descriptor to wait on; a provider
	// without one gets a polled CQ and WaitFD reports -1.
	Wait bool
	// MinMultiRecv is the space below which a multi-receive buffer is
	// released (FI_OPT_MIN_MULTI_RECV); 0 keeps the provider's.
	MinMultiRecv int
}

// Endpoint is one RDM endpoint with its own fabric, domain, address
// vector (a table: an Addr is an index) and completion queue. Its
// methods are not safe for concurrent use, as the domain's threading
// model (ThreadDomain) says: the caller serializes them.
type Endpoint struct {
	info   *C.struct_fi_info // a copy, owned
	fabric *C.struct_fid_fabric
	domain *C.struct_fid_domain
	av     *C.struct_fid_av
	cq     *C.struct_fid_cq
	ep     *C.struct_fid_ep
	waitFD int
	ents   *C.struct_fi_cq_tagged_entry // C array of nents
	nents  int
	// Info describes the endpoint's provider and domain.
	Info Info
}

// maxBatch is the most completions one Read takes.
const maxBatch = 64

// Open makes an endpoint from one of a List's Infos; the List may be
// freed afterwards.
func Open(info *Info, o Options) (*Endpoint, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	dup := C.gobtl_dupinfo(info.c)
	if dup == nil {
		return nil, fmt.Errorf("fi_dupinfo: %w", Errno(C.FI_ENOMEM))
	}
	e := &Endpoint{info: dup, waitFD: -1}
	want := 0
	if o.Wait {
		want = 1
	}
	var wfd C.int
	var where *C.char
	rc := C.gobtl_open(dup, C.size_t(o.CQSize), C.int(want), C.size_t(o.MinMultiRecv), &e.fabric, &e.domain, &e.av, &e.cq, &e.ep, &wfd, &where)
	if rc != 0 {
		C.gobtl_freeinfo(dup)
		return nil, fmt.Errorf("%s (%s, domain %s): %w", C.GoString(where), info.Provider, info.Domain, Errno(-rc))
	}
	e.waitFD = int(wfd)
	e.ents = (*C.struct_fi_cq_tagged_entry)(C.calloc(maxBatch, C.sizeof_struct_fi_cq_tagged_entry))
	e.nents = maxBatch
	e.Info = describe(dup)
	return e, nil
}

// Close releases every object of the endpoint. Operations in flight are
// dropped: memory they used may be reused once Close returns.
func (e *Endpoint) Close() error {
	if e.info == nil {
		return nil
	}
	rc := C.gobtl_close(e.fabric, e.domain, e.av, e.cq, e.ep)
	C.gobtl_freeinfo(e.info)
	C.free(unsafe.Pointer(e.ents))
	e.info, e.ents, e.ep, e.cq, e.av, e.domain, e.fabric = nil, nil, nil, nil, nil, nil, nil
	return ierrno(rc)
}

// Name is the endpoint's address, to publish (fi_getname).
func (e *Endpoint) Name() ([]byte, error) {
	buf := make([]byte, 256)
	n := C.size_t(len(buf))
	if rc := C.gobtl_getname(e.ep, unsafe.Pointer(&buf[0]), &n); rc != 0 {
		return nil, fmt.Errorf("fi_getname: %w", Errno(-rc))
	}
	return buf[:n], nil
}

// Insert adds a peer's address (its Name) to the address vector.
func (e *Endpoint) Insert(name []byte) (Addr, error) {
	if len(name) == 0 {
		return 0, fmt.Errorf("fi_av_insert: empty address: %w", Errno(C.FI_EINVAL))
	}
	var a C.uint64_t
	if rc := C.gobtl_av_insert(e.av, unsafe.Pointer(&name[0]), &a); rc != 0 {
		return 0, fmt.Errorf("fi_av_insert: %w", Errno(-rc))
	}
	return Addr(a), nil
}

// Remove takes a peer out of the address vector.
func (e *Endpoint) Remove(a Addr) error {
	return ierrno(C.gobtl_av_remove(e.av, C.uint64_t(a)))
}

// AddrString renders an address as the provider prints it.
func (e *Endpoint) AddrString(name []byte) string {
	if len(name) == 0 {
		return ""
	}
	buf := make([]byte, 128)
	n := C.size_t(len(buf))
	C.gobtl_av_straddr(e.av, unsafe.Pointer(&name[0]), (*C.char)(unsafe.Pointer(&buf[0])), &n)
	return C.GoString((*C.char)(unsafe.Pointer(&buf[0])))
}

// ptr is the address of b's first byte for C, nil for an empty b.
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// TSend sends buf, tagged tag, with data as remote CQ data; ctx comes
// back in its completion. buf must stay unchanged until then.
func (e *Endpoint) TSend(buf []byte, desc Desc, data uint64, dest Addr, tag, ctx uint64) error {
	return errno(C.gobtl_tsenddata(e.ep, ptr(buf), C.size_t(len(buf)), desc.p, C.uint64_t(data),
		C.uint64_t(dest), C.uint64_t(tag), C.uint64_t(ctx)))
}

// TInject sends buf (at most Info.InjectSize bytes), tagged tag with
// data: buf is copied before it returns and no completion comes.
func (e *Endpoint) TInject(buf []byte, data uint64, dest Addr, tag uint64) error {
	return errno(C.gobtl_tinjectdata(e.ep, ptr(buf), C.size_t(len(buf)), C.uint64_t(data), C.uint64_t(dest), C.uint64_t(tag)))
}

// TRecv posts buf for a message whose tag matches tag outside the bits
// set in ignore, from src (AddrUnspec: anyone).
func (e *Endpoint) TRecv(buf []byte, desc Desc, src Addr, tag, ignore, ctx uint64) error {
	return errno(C.gobtl_trecv(e.ep, ptr(buf), C.size_t(len(buf)), desc.p, C.uint64_t(src), C.uint64_t(tag),
		C.uint64_t(ignore), C.uint64_t(ctx)))
}

// Recv posts buf for an untagged message from src (AddrUnspec: anyone).
func (e *Endpoint) Recv(buf []byte, desc Desc, src Addr, ctx uint64) error {
	return errno(C.gobtl_recv(e.ep, ptr(buf), C.size_t(len(buf)), desc.p, C.uint64_t(src), C.uint64_t(ctx)))
}

// Send sends buf untagged with data as remote CQ data.
func (e *Endpoint) Send(buf []byte, desc Desc, data uint64, dest Addr, ctx uint64) error {
	return errno(C.gobtl_senddata(e.ep, ptr(buf), C.size_t(len(buf)), desc.p, C.uint64_t(data), C.uint64_t(dest), C.uint64_t(ctx)))
}

// Inject sends buf untagged, copied before it returns, no completion.
func (e *Endpoint) Inject(buf []byte, data uint64, dest Addr) error {
	return errno(C.gobtl_injectdata(e.ep, ptr(buf), C.size_t(len(buf)), C.uint64_t(data), C.uint64_t(dest)))
}

// RecvMulti posts buf as a multi-receive buffer for untagged messages
// (the endpoint needs CapMultiRecv): each message lands after the last,
// completing with its own Completion whose Buf says where; the one
// flagged FlagMultiRecv releases buf.
func (e *Endpoint) RecvMulti(buf []byte, desc Desc, ctx uint64) error {
	return errno(C.gobtl_recv_multi(e.ep, ptr(buf), C.size_t(len(buf)), desc.p, C.uint64_t(ctx)))
}

// Write writes local into the peer's memory at addr under key; flags may
// add DeliveryComplete.
func (e *Endpoint) Write(local []byte, desc Desc, peer Addr, addr, key, ctx, flags uint64) error {
	return errno(C.gobtl_rma(e.ep, 1, ptr(local), C.size_t(len(local)), desc.p, C.uint64_t(peer),
		C.uint64_t(addr), C.uint64_t(key), C.uint64_t(ctx), C.uint64_t(flags)))
}

// Read reads the peer's memory at addr under key into local.
func (e *Endpoint) Read(local []byte, desc Desc, peer Addr, addr, key, ctx uint64) error {
	return errno(C.gobtl_rma(e.ep, 0, ptr(local), C.size_t(len(local)), desc.p, C.uint64_t(peer),
		C.uint64_t(addr), C.uint64_t(key), C.uint64_t(ctx), 0))
}

// Completion is one entry of the CQ (fi_cq_tagged_entry).
type Completion struct {
	Context uint64
	Flags   uint64
	Len     int
	Buf     uintptr // where a received message landed
	Data    uint64  // remote CQ data
	Tag     uint64
}

// Poll takes up to len(out) completions (at most 64) and returns how
// many. Nothing to read is 0 and no error; an error completion waiting
// is ErrAvail (read it with ReadErr).
func (e *Endpoint) Poll(out []Completion) (int, error) {
	n := min(len(out), e.nents)
	rc := C.gobtl_cq_read(e.cq, e.ents, C.size_t(n))
	if rc < 0 {
		if Errno(-rc) == ErrAgain {
			return 0, nil
		}
		return 0, Errno(-rc)
	}
	ents := unsafe.Slice(e.ents, int(rc))
	for i := range ents {
		c := &ents[i]
		out[i] = Completion{Context: uint64(uintptr(c.op_context)), Flags: uint64(c.flags), Len: int(c.len),
			Buf: uintptr(c.buf), Data: uint64(c.data), Tag: uint64(c.tag)}
	}
	return int(rc), nil
}

// CQError is an error completion.
type CQError struct {
	Context uint64
	Flags   uint64
	Len     int
	Tag     uint64
	Err     Errno
	ProvErr int
	Msg     string
}

func (c *CQError) Error() string {
	return fmt.Sprintf("%v (provider error %d: %s)", c.Err, c.ProvErr, c.Msg)
}

// Unwrap lets errors.Is see the Errno.
func (c *CQError) Unwrap() error { return c.Err }

// ReadErr takes the error completion waiting; ok is false when none is.
func (e *Endpoint) ReadErr() (ce CQError, ok bool) {
	var ctx, flags, n, tag C.uint64_t
	var er, prov C.int
	var msg [256]C.char
	rc := C.gobtl_cq_readerr(e.cq, &ctx, &flags, &n, &er, &prov, &tag, &msg[0], C.size_t(len(msg)))
	if rc <= 0 {
		return CQError{}, false
	}
	return CQError{Context: uint64(ctx), Flags: uint64(flags), Len: int(n), Tag: uint64(tag), Err: Errno(er),
		ProvErr: int(prov), Msg: C.GoString(&msg[0])}, true
}

// WaitFD is the file descriptor that becomes readable when completions
// may be waiting, or -1 when the provider has none. Wait on it only after
// TryWait said so.
func (e *Endpoint) WaitFD() int { return e.waitFD }

// TryWait reports whether the caller may block on WaitFD now: nil, or
// ErrAgain when completions are pending (read them first).
func (e *Endpoint) TryWait() error {
	if e.waitFD < 0 {
		return Errno(C.FI_ENOSYS)
	}
	return ierrno(C.gobtl_trywait(e.fabric, e.cq))
}

// Desc is a registration's local descriptor, for the operations on the
// memory it covers (needed where the domain's mr_mode has MRLocal). The
// zero Desc is none.
type Desc struct{ p unsafe.Pointer }

// MR is a memory registration.
type MR struct {
	mr  *C.struct_fid_mr
	pin runtime.Pinner
	// Key is the remote key to give peers.
	Key uint64
	// Desc is the local descriptor.
	Desc Desc
	// Base is the remote address of the region's first byte: its virtual
	// address under MRVirtAddr, else 0 (addresses are offsets).
	Base uint64
}

// Register registers buf for access (Access* bits) under key (ignored
// under MRProvKey, when the provider picks it). Go memory is pinned until
// Close; memory outside Go's heap (mmap) needs no pin.
func (e *Endpoint) Register(buf []byte, access, key uint64) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("fi_mr_reg: empty region: %w", Errno(C.FI_EINVAL))
	}
	m := &MR{}
	m.pin.Pin(&buf[0])
	bind := C.int(0)
	if e.Info.MRMode&MREndpoint != 0 {
		bind = 1
	}
	var k C.uint64_t
	var desc unsafe.Pointer
	rc := C.gobtl_mr_reg(e.domain, e.ep, bind, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.uint64_t(access),
		C.uint64_t(key), &m.mr, &k, &desc)
	if rc != 0 {
		m.pin.Unpin()
		return nil, fmt.Errorf("fi_mr_reg(%d bytes): %w", len(buf), Errno(-rc))
	}
	m.Key, m.Desc = uint64(k), Desc{desc}
	if e.Info.MRMode&MRVirtAddr != 0 {
		m.Base = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	return m, nil
}

// Close deregisters the memory and unpins it.
func (m *MR) Close() error {
	if m.mr == nil {
		return nil
	}
	rc := C.gobtl_mr_close(m.mr)
	m.mr = nil
	m.pin.Unpin()
	return ierrno(rc)
}
