package gobtl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// oneRank is a communicator of a job of one rank, for the abort path.
func oneRank(t *testing.T) *pml.Comm {
	t.Helper()
	c, err := Init(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.p
}

// TestAPluginAbortReachesTheCommunicatorWheneverItComes: a plugin with
// on_failure = "abort" may fail while the job starts (Init then fails) or
// later (the communicator's blocking calls then fail); either way the
// caller gets core.ErrAborted wrapping the plugin's error, and the process
// goes on.
func TestAPluginAbortReachesTheCommunicatorWheneverItComes(t *testing.T) {
	boom := errors.New("plugin failed")
	// blocked is a receive nothing matches: only an abort ends it.
	blocked := func(c *pml.Comm) error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Recv(make([]byte, 8), 0, 99)
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("a receive on an aborted communicator still waits")
			return nil
		}
	}

	var early aborter
	early.abort(boom)
	c := oneRank(t)
	if err := early.attach(c); !errors.Is(err, core.ErrAborted) || !errors.Is(err, boom) {
		t.Fatalf("attach after the failure = %v, want ErrAborted wrapping it", err)
	}
	if err := blocked(c); !errors.Is(err, core.ErrAborted) || !errors.Is(err, boom) {
		t.Fatalf("a receive after an early abort: %v", err)
	}

	var late aborter
	c = oneRank(t)
	if err := late.attach(c); err != nil {
		t.Fatalf("attach before any failure: %v", err)
	}
	late.abort(boom)
	late.abort(errors.New("a second failure")) // the first cause stays
	if err := blocked(c); !errors.Is(err, core.ErrAborted) || !errors.Is(err, boom) {
		t.Fatalf("a receive after a late abort: %v", err)
	}
}
