package inproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// elsewhere is a rank's bootstrap that publishes another process's address.
type elsewhere struct{ core.Bootstrap }

func (e elsewhere) Put(key string, _ []byte) error {
	return e.Bootstrap.Put(key, []byte("another process"))
}

func openAll(t *testing.T, boots []core.Bootstrap) []core.Module {
	t.Helper()
	mods := make([]core.Module, len(boots))
	for r, b := range boots {
		ms, err := open(core.BTLEnv{Instance: "t", Params: core.MustParams(Params), Boot: b, Clock: core.SystemClock, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		mods[r] = ms[0]
	}
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Go(func() {
			if err := b.Fence(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return mods
}

func TestARankInAnotherProcessIsUnreachable(t *testing.T) {
	boots := boot.Group(3, fmt.Sprintf("%s-%p", t.Name(), t))
	boots[2] = elsewhere{boots[2]}
	mods := openAll(t, boots)
	defer func() {
		for _, m := range mods {
			m.Close()
		}
	}()
	if _, err := mods[0].Endpoint(1); err != nil {
		t.Fatalf("rank 1 shares the process: %v", err)
	}
	for range 2 { // the verdict is kept
		if _, err := mods[0].Endpoint(2); !errors.Is(err, core.ErrUnreachable) {
			t.Fatalf("Endpoint(2) = %v, want ErrUnreachable", err)
		}
	}
}

func TestTheLastCloseReleasesTheJobsFabric(t *testing.T) {
	id := fmt.Sprintf("%s-%p", t.Name(), t)
	mods := openAll(t, boot.Group(2, id))
	jobs.Lock()
	j := jobs.m[id]
	jobs.Unlock()
	if j == nil || j.open != 2 {
		t.Fatalf("the job's fabric is %+v, want one held by both ranks", j)
	}
	mods[0].Close()
	mods[0].Close() // a second Close gives nothing back twice
	jobs.Lock()
	_, held := jobs.m[id]
	jobs.Unlock()
	if !held {
		t.Fatal("the fabric went while rank 1 still holds it")
	}
	mods[1].Close()
	jobs.Lock()
	_, held = jobs.m[id]
	jobs.Unlock()
	if held {
		t.Fatal("the fabric outlived its last module")
	}
}

func TestAJobOfAnotherSizeIsRefused(t *testing.T) {
	id := fmt.Sprintf("%s-%p", t.Name(), t)
	mods := openAll(t, boot.Group(2, id))
	defer mods[0].Close()
	defer mods[1].Close()
	_, err := open(core.BTLEnv{Instance: "t", Params: core.MustParams(Params), Boot: boot.Group(3, id)[0], Clock: core.SystemClock})
	if err == nil {
		t.Fatal("a rank of a 3-rank job joined a 2-rank fabric of the same job id")
	}
}
