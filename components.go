package gobtl

// The components compiled into every program that imports gobtl (and so
// into the gobtl command): each registers itself with core from init, the
// database/sql driver pattern. Add a blank import here when a component
// lands.
import (
	_ "github.com/gobtl/gobtl/btl/extoll"
	_ "github.com/gobtl/gobtl/btl/ib"
	_ "github.com/gobtl/gobtl/btl/inproc"
	_ "github.com/gobtl/gobtl/btl/ofi"
	_ "github.com/gobtl/gobtl/btl/self"
	_ "github.com/gobtl/gobtl/btl/sm"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_dynamic"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_hardware"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/ib_static"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/none"
	_ "github.com/gobtl/gobtl/policies/recvbuf/bsrq"
	_ "github.com/gobtl/gobtl/policies/recvbuf/perpeer"
	_ "github.com/gobtl/gobtl/policies/recvbuf/srq"
	_ "github.com/gobtl/gobtl/policies/sched"
)
