package gobtl

import (
	"context"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// bootstrapFromEnv returns the bootstrap `gobtl run` left in the
// environment (package boot): ok is false, with no error, for a program
// started alone.
func bootstrapFromEnv(ctx context.Context) (core.Bootstrap, bool, error) {
	c, ok, err := boot.FromEnv(ctx)
	if !ok || err != nil {
		return nil, ok, err // never a nil *boot.Client in an interface
	}
	return c, true, nil
}
