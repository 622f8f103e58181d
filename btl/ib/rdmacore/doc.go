// Package rdmacore is the verbs interface of package verbs over
// libibverbs (rdma-core) through cgo, for real InfiniBand and RoCE HCAs. It
// is built only with the rdmacore build tag (go build -tags rdmacore) and
// needs libibverbs-dev to compile and libibverbs with a provider for the
// HCA to run; without the tag this package is empty and the ib BTL offers
// softrc alone.
//
// Status, stated plainly: this provider compiles in CI against rdma-core's
// headers, and its constants are checked at compile time against
// libibverbs' enums, but it has never run on an HCA — the machines gobtl
// is developed on have no InfiniBand and no kernel RDMA. Treat it as a
// starting point to validate on hardware, not as tested code.
//
// Memory registered through it is pinned with runtime.Pinner for the life
// of the region, so that the HCA may keep the address of Go memory, as the
// cgo rules require. Work requests are built in C memory owned by each QP;
// completion channels and the async event queue use non-blocking file
// descriptors, waited on by a goroutine per channel in Go's netpoller.
package rdmacore
