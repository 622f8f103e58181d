package recvbuf

import "github.com/gobtl/gobtl/core"

// Parameters the layouts share, with one range each so that a stack
// file's bad value is reported at its line by the schema.
var (
	// MaxFactorParam bounds how far a shared queue grows (srq, bsrq).
	MaxFactorParam = core.Param{Name: "max_factor", Type: core.ParamInt, Default: "4", Min: "1", Max: "65536",
		Doc: "a shared queue may grow to this many times its initial buffers"}
	// GrowParam is how much a shared queue grows on its limit (srq, bsrq).
	GrowParam = core.Param{Name: "grow", Type: core.ParamFloat, Default: "0.5", Min: "0",
		Doc: "on an SRQ-limit event, post this fraction of the queue's initial buffers more"}
	// SendFreeListMaxParam bounds the send buffers of one size (all three).
	SendFreeListMaxParam = core.Param{Name: "send_free_list_max", Type: core.ParamInt, Default: "256", Min: "1",
		Doc: "most send buffers per buffer size"}
)

// QueuesParam is the receive_queues parameter of a layout written in Open
// MPI's syntax (perpeer, srq), with the layout's default; what says which
// queues it takes.
func QueuesParam(def, what string) core.Param {
	return core.Param{Name: "receive_queues", Type: core.ParamString, Default: def,
		Doc: what + " in Open MPI receive_queues syntax"}
}

// Register registers a layout as a receive-buffer component; build is
// the layout's New.
func Register(name, doc string, params []core.Param, build func(core.Params) (*Fixed, error)) {
	core.Register(&core.Component{Kind: core.KindRecvBuf, Name: name, Doc: doc, Params: params,
		NewPolicy: func(p core.Params) (any, error) { return build(p) }})
}
