package gobtl

import (
	"fmt"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/coll/shm"
	"github.com/gobtl/gobtl/core"
)

// nodeColl gives the collective layer the shared-memory node component
// (coll/shm). Its segments carry the job's prefix, so that the launcher
// removes what a killed job left; the engine's locality, where known,
// says which ranks share a node (else the component asks the host). The
// decision table takes it by itself where the ranks own their cores
// (coll.Machine.OwnCore); where they share them only the collectives the
// coll block forces to "shm" use it, and its waits do not spin, as the
// PML's do not there.
func (s *start) nodeColl(tu *coll.Tuning) {
	o := shm.Options{Prefix: core.ShmPrefix(s.boot.JobID())}
	if s.locality != nil {
		o.Label = fmt.Sprint("node ", s.locality.Node(s.boot.Rank()))
	}
	if !tu.Machine.OwnCore {
		o.Spin = -1
	}
	tu.Node = shm.New(o)
}
