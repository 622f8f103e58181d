// Package fabric is a thin cgo layer over libfabric (OFI) for btl/ofi:
// fi_getinfo with hints, and one reliable-datagram endpoint (FI_EP_RDM)
// with its fabric, domain, address vector and completion queue — the
// objects one BTL module owns — plus memory registration, tagged sends
// and receives, RMA reads and writes, completion reads and the CQ's wait
// object. It says nothing about frames, credits or peers: that is
// btl/ofi's.
//
// The package is built only with the ofi build tag (and cgo), against
// libfabric's headers (Debian's libfabric-dev; `make ofi-dev` installs
// it). It does not link libfabric: Init loads libfabric.so.1 when the
// package is first used (ErrNoLibrary where it cannot), so that a process
// that never opens btl "ofi" does not load libfabric and every provider's
// libraries with it — one of Debian's sleeps ~200 ms as it loads, which
// every gobtl process paid at start while it was linked. Without the tag
// the package is empty and Available is false.
//
// Memory. Whatever the provider may touch after a call returns — posted
// receive buffers, the source of a send still in flight, the target of a
// read, a registered region — is either memory outside Go's heap (mmap,
// C.malloc; the module's receive slabs and send buffers) or Go memory the
// caller keeps still with a runtime.Pinner for as long as the provider
// holds it (RegisterMem pins the region it registers). Operation contexts
// are integers the caller chooses, carried through C as pointer-sized
// values and handed back in completions; no Go pointer is ever stored in
// C.
//
// Registration cache. libfabric's own MR cache watches the process's
// frees through memory hooks (or userfaultfd) and cannot see Go's garbage
// collector return memory; a cached registration could then outlive its
// memory. Init sets FI_MR_CACHE_MONITOR=disabled before libfabric reads
// its environment (the first fi_getinfo), and btl/ofi keeps its own cache
// of registrations, each holding the pin of its memory.
//
// Keys. With FI_MR_PROV_KEY the provider names the key; otherwise the
// caller passes one (btl/ofi draws it at random, so that a process
// outside the job cannot guess it). With FI_MR_VIRT_ADDR a remote address
// is the target's virtual address, otherwise an offset into the region:
// MR.Base says which to put in a key.
package fabric
