package conformance

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
)

var testpolicy string

func TestMain(m *testing.M) {
	mptest.Main(m, nil, func() (func(), error) {
		dir, cleanup, err := mptest.BuildTemp("", "../internal/testplugins/testpolicy")
		testpolicy = filepath.Join(dir, "testpolicy")
		return cleanup, err
	})
}

func verify(t *testing.T, mode string) *Report {
	t.Helper()
	// Misbehaving modes trip on their first batch, and behave before it.
	// Only a plugin that hangs is to miss the deadline: the others answer
	// within one that a loaded machine cannot stretch past.
	deadline := 30 * time.Second
	if mode == "hang" {
		deadline = 500 * time.Millisecond
	}
	r, err := Verify(context.Background(), testpolicy, Options{Params: map[string]string{"mode": mode, "before": "good"}, Events: 3000, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r.Write(&b)
	t.Log("\n" + b.String())
	return r
}

func find(r *Report, name string) *Result {
	for i := range r.Results {
		if r.Results[i].Name == name {
			return &r.Results[i]
		}
	}
	return nil
}

func TestAWellBehavedPluginPasses(t *testing.T) {
	r := verify(t, "good")
	if !r.Passed() {
		t.Fatal("a well-behaved policy failed the suite")
	}
	for _, name := range []string{"flow_control/stream/ib", "flow_control/crash", "flow_control/restart", "recvbuf/stream/8peers", "sched/stream", "sched/restart"} {
		if res := find(r, name); res == nil || res.Skip {
			t.Errorf("check %s did not run", name)
		}
	}
}

func TestInvalidDecisionsFailEveryKind(t *testing.T) {
	r := verify(t, "bad")
	if r.Passed() {
		t.Fatal("a policy proposing invalid decisions passed")
	}
	for name, want := range map[string]string{
		"flow_control/stream/ib": "the range its setup allows",
		"recvbuf/stream/8peers":  "decision for queue",
		"sched/stream":           "finite and non-negative",
	} {
		res := find(r, name)
		if res == nil || res.Err == nil || !strings.Contains(res.Err.Error(), want) {
			t.Errorf("%s: %+v, want a failure mentioning %q", name, res, want)
		}
	}
}

func TestAPluginThatStopsAnsweringFails(t *testing.T) {
	r := verify(t, "hang")
	for _, name := range []string{"flow_control/stream/ib", "recvbuf/stream/8peers", "sched/stream"} {
		res := find(r, name)
		if res == nil || res.Err == nil || !strings.Contains(res.Err.Error(), "no answer") {
			t.Errorf("%s: %+v, want a missed deadline", name, res)
		}
	}
}

func TestAPluginThatRefusesEverySetupFails(t *testing.T) {
	r := verify(t, "refuse")
	if r.Passed() {
		t.Fatal("a policy that refuses every Setup passed")
	}
	if res := find(r, "flow_control/setup"); res == nil || res.Err == nil {
		t.Fatalf("flow_control/setup: %+v", res)
	}
}

func TestANonPluginCannotBeVerified(t *testing.T) {
	if _, err := Verify(context.Background(), "/bin/true", Options{}); err == nil || !strings.Contains(err.Error(), "not a gobtl policy plugin") {
		t.Fatalf("Verify(/bin/true) = %v", err)
	}
}
