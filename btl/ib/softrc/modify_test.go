package softrc

import (
	"errors"
	"testing"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// Attribute values outside what the IBA (and softrc) allow are refused
// as invalid, leaving the QP in its state: a later, valid Modify takes it
// on. The errors wrap verbs.ErrInvalid.
func TestStateMachineRefusesValuesOutOfRangeAndStaysWhereItWas(t *testing.T) {
	a, b := newEnd(t, endOpts{}), newEnd(t, endOpts{})
	rtr := func(f func(*verbs.QPAttr)) verbs.QPAttr {
		at := verbs.QPAttr{State: verbs.QPRTR, AH: verbs.AHAttr{DLID: b.port.LID, DGID: b.port.GID, IsGlobal: true, PortNum: 1},
			PathMTU: verbs.MTU4096, DestQPN: b.qp.QPN(), RQPSN: 100, MaxDestRdAtomic: 4, MinRNRTimer: 1}
		f(&at)
		return at
	}
	rts := func(f func(*verbs.QPAttr)) verbs.QPAttr {
		at := verbs.QPAttr{State: verbs.QPRTS, SQPSN: 100, Timeout: 18, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4}
		f(&at)
		return at
	}
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.QPInit, Port: 1, AccessFlags: allAccess}, verbs.RCInitMask); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		attr verbs.QPAttr
		mask verbs.QPAttrMask
		in   verbs.QPState
	}{
		{"a path MTU of no size", rtr(func(at *verbs.QPAttr) { at.PathMTU = 0 }), verbs.RCRTRMask, verbs.QPInit},
		{"more reads in flight to this QP than it keeps", rtr(func(at *verbs.QPAttr) { at.MaxDestRdAtomic = maxRdAtomic + 1 }), verbs.RCRTRMask, verbs.QPInit},
		{"RTR without the path", rtr(func(*verbs.QPAttr) {}), verbs.RCRTRMask &^ verbs.QPAttrPathMTU, verbs.QPInit},
		{"a retry count over 7", rts(func(at *verbs.QPAttr) { at.RetryCnt = 8 }), verbs.RCRTSMask, verbs.QPRTR},
		{"an RNR retry count over 7", rts(func(at *verbs.QPAttr) { at.RNRRetry = 8 }), verbs.RCRTSMask, verbs.QPRTR},
		{"more reads in flight than it keeps", rts(func(at *verbs.QPAttr) { at.MaxRdAtomic = maxRdAtomic + 1 }), verbs.RCRTSMask, verbs.QPRTR},
		{"RTS without the timeout", rts(func(*verbs.QPAttr) {}), verbs.RCRTSMask &^ verbs.QPAttrTimeout, verbs.QPRTR},
	} {
		if c.in == verbs.QPRTR {
			if at, _ := a.qp.Query(); at.State == verbs.QPInit {
				ok := rtr(func(*verbs.QPAttr) {})
				if err := a.qp.Modify(&ok, verbs.RCRTRMask); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := a.qp.Modify(&c.attr, c.mask); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		if at, _ := a.qp.Query(); at.State != c.in {
			t.Errorf("%s: the QP went to %v", c.name, at.State)
		}
	}
	ok := rts(func(*verbs.QPAttr) {})
	if err := a.qp.Modify(&ok, verbs.RCRTSMask); err != nil {
		t.Fatal(err)
	}
	if at, _ := a.qp.Query(); at.State != verbs.QPRTS || at.MaxRdAtomic != 4 {
		t.Fatalf("after the refusals: %+v", at)
	}
}
