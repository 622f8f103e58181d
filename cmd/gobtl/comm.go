package main

import (
	"context"
	"os"

	"github.com/gobtl/gobtl/internal/devinit"
	"github.com/gobtl/gobtl/pml"
)

// openComm opens the bench's communicator and says how it was configured.
// Until gobtl.Init lands it is devinit's sm-only stack.
func openComm(ctx context.Context, stack string) (*pml.Comm, map[string]any, error) {
	c, err := devinit.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	proto := os.Getenv("GOBTL_PROTOCOL")
	if proto == "" {
		proto = "rdma_read"
	}
	return c, map[string]any{"stack": "devinit (sm)", "protocol": proto, "single_copy": os.Getenv("GOBTL_SM_SINGLE_COPY")}, nil
}
