package gobtl

import (
	"context"

	"github.com/gobtl/gobtl/conf"
)

// CheckStart starts a job of n ranks on the loaded stack cfg as Init
// starts each rank, then stops it: the ranks are goroutines of this
// process over the stack's own transports (for a stack that names none,
// the default stack's transports between processes), so that every
// transport is opened on this host — the interfaces its if_include names,
// the directories it names — and every policy is built and set up with
// the job's transports and rails. `gobtl config check` and `gobtl run`
// call it, so that a stack they accept starts. It returns the first
// rank's error: a stack's mistake is a *conf.Error at file:line:col
// (errors.As). The ranks log nothing, whatever the stack or GOBTL_LOG
// says: the job that follows logs for itself.
func CheckStart(ctx context.Context, cfg *conf.Config, n int) error {
	c := *cfg
	c.Job.Log = conf.Log{Level: "disabled"}
	return runLocal(ctx, localJob(n), Options{Config: &c, quiet: true}, false, func(*Comm) error { return nil })
}
