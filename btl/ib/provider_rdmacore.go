//go:build rdmacore && cgo

package ib

// With the rdmacore build tag the BTL can also run on real HCAs through
// libibverbs (provider = "rdmacore").
import _ "github.com/gobtl/gobtl/btl/ib/rdmacore"
