package release

// Store64 stores v at addr after every store before it is visible
// (a release store), without waiting for them to drain as an atomic
// exchange does: the sender goes on while the slot's cache line travels.
//
//go:noescape
func Store64(addr *uint64, v uint64)

// Store32 is Store64 for a 32-bit word.
//
//go:noescape
func Store32(addr *uint32, v uint32)
