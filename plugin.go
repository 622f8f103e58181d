package gobtl

import (
	"context"
	"fmt"
	"io"

	"github.com/gobtl/gobtl/conf"
)

// openPlugin starts an out-of-process policy. The plugin host is not part
// of this build yet, so a stack that names a plugin fails with a clear
// error at its policy block.
func openPlugin(_ context.Context, _ *conf.Config, p *conf.Policy, _ *conf.Loggers) (any, io.Closer, error) {
	return nil, nil, fmt.Errorf("gobtl: %s: policy %q: plugin %q: this build has no plugin host; use builtin = %q", rangeOf(p.DeclRange), p.Kind, p.Name, p.Name)
}
