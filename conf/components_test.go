package conf_test

import (
	"errors"
	"fmt"

	"github.com/gobtl/gobtl/core"

	// Every component compiled into gobtl, so that the examples are
	// checked against the real schemas.
	_ "github.com/gobtl/gobtl"
)

// The private components below exist only in this test binary. Between
// them they use every core.ParamType, nested and repeated blocks, enums,
// checks and required parameters.

var errTestOnly = errors.New("test component: not for use")

var testBTLParams = []core.Param{
	{Name: "device", Type: core.ParamString, Default: "dev0", Doc: "device name"},
	{Name: "mode", Type: core.ParamString, Default: "poll", Enum: []string{"poll", "event"}, Doc: "completion mode"},
	{Name: "ports", Type: core.ParamInt, Default: "1", Doc: "ports to open", Check: func(v any) error {
		if v.(int64) < 1 {
			return fmt.Errorf("must be at least 1, got %d", v.(int64))
		}
		return nil
	}},
	{Name: "weight", Type: core.ParamFloat, Default: "1.5", Doc: "rail weight"},
	{Name: "verbose", Type: core.ParamBool, Default: "false", Doc: "chatty"},
	{Name: "eager_limit", Type: core.ParamSize, Default: "4KiB", Doc: "eager limit"},
	{Name: "max_send", Type: core.ParamSize, Doc: "largest send; unset: unlimited"},
	{Name: "bandwidth", Type: core.ParamRate, Default: "1GB/s", Doc: "link rate"},
	{Name: "latency", Type: core.ParamDuration, Default: "2us", Doc: "one-way latency"},
	{Name: "hosts", Type: core.ParamStrings, Doc: "peers"},
	{Name: "labels", Type: core.ParamMap, Doc: "free-form labels"},
	{Name: "queue", Type: core.ParamBlock, Repeat: true, Doc: "a receive queue", Block: []core.Param{
		{Name: "size", Type: core.ParamSize, Required: true, Doc: "buffer size"},
		{Name: "count", Type: core.ParamInt, Default: "8", Doc: "buffers"},
	}},
	{Name: "tuning", Type: core.ParamBlock, Doc: "knobs", Block: []core.Param{
		{Name: "spin", Type: core.ParamInt, Default: "10", Doc: "spins"},
		{Name: "retry", Type: core.ParamBlock, Doc: "retries", Block: []core.Param{
			{Name: "count", Type: core.ParamInt, Default: "7", Doc: "7 is infinite"},
		}},
	}},
}

var testFCParams = []core.Param{
	{Name: "threshold", Type: core.ParamInt, Default: "4", Doc: "explicit-credit threshold"},
	{Name: "buffers", Type: core.ParamInt, Required: true, Doc: "pre-posted buffers"},
	{Name: "bucket", Type: core.ParamBlock, Repeat: true, Doc: "a bucket", Block: []core.Param{
		{Name: "size", Type: core.ParamSize, Default: "8KiB", Doc: "size"},
	}},
}

// pluginFCParams is what the fake plugin host answers for plugin "plugfc".
var pluginFCParams = []core.Param{
	{Name: "window", Type: core.ParamInt, Default: "16", Doc: "window"},
}

func init() {
	openBTL := func(core.BTLEnv) ([]core.Module, error) { return nil, errTestOnly }
	newPolicy := func(core.Params) (any, error) { return nil, errTestOnly }
	core.Register(&core.Component{Kind: core.KindBTL, Name: "testnet", Doc: "a test BTL with every parameter type", Params: testBTLParams, OpenBTL: openBTL})
	core.Register(&core.Component{Kind: core.KindBTL, Name: "testreq", Doc: "a test BTL with a required parameter", OpenBTL: openBTL,
		Params: []core.Param{{Name: "address", Type: core.ParamString, Required: true, Doc: "where"}}})
	core.Register(&core.Component{Kind: core.KindFlowControl, Name: "testfc", Doc: "a test flow-control policy", Params: testFCParams, NewPolicy: newPolicy})
	core.Register(&core.Component{Kind: core.KindRecvBuf, Name: "testrb", Doc: "a test receive-buffer policy", NewPolicy: newPolicy})
}
