//go:build !pmix || !cgo

package pmix

import (
	"context"
	"os"

	"github.com/gobtl/gobtl/core"
)

// Available reports whether this build can join a PMIx job: false
// without the pmix build tag.
const Available = false

// FromEnv fails with ErrNotBuilt: this build has no PMIx client.
func FromEnv(context.Context) (core.Bootstrap, error) {
	return nil, notBuilt(os.Getenv(EnvNamespace))
}
