package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

func transcript() *core.Transcript {
	return &core.Transcript{Protocol: "test", Dialer: []byte("dialer"), Acceptor: []byte("acceptor"),
		DialerNonce: core.NewNonce(), Nonce: core.NewNonce()}
}

func TestAProofChecksOnlyUnderItsKeyRoleAndTranscript(t *testing.T) {
	k := core.NewJobKey()
	tr := transcript()
	p := k.Prove(core.Dialer, tr)
	if !k.Check(core.Dialer, tr, p[:]) {
		t.Fatal("a proof does not check against its own transcript")
	}
	if k.Check(core.Acceptor, tr, p[:]) {
		t.Error("the dialer's proof passes as the acceptor's: it could be reflected")
	}
	if core.NewJobKey().Check(core.Dialer, tr, p[:]) {
		t.Error("a proof checks under another job's key")
	}
	for name, change := range map[string]func(*core.Transcript){
		"protocol":       func(t *core.Transcript) { t.Protocol = "other" },
		"dialer":         func(t *core.Transcript) { t.Dialer = []byte("dialex") },
		"acceptor":       func(t *core.Transcript) { t.Acceptor = nil },
		"dialer nonce":   func(t *core.Transcript) { t.DialerNonce[3] ^= 1 },
		"acceptor nonce": func(t *core.Transcript) { t.Nonce[15] ^= 0x80 },
		// Length prefixes keep the parts apart: moving a byte from one
		// identity to the other is another transcript.
		"boundary": func(t *core.Transcript) { t.Dialer, t.Acceptor = []byte("dialera"), []byte("cceptor") },
	} {
		c := *tr
		change(&c)
		if k.Check(core.Dialer, &c, p[:]) {
			t.Errorf("the proof still checks with another %s", name)
		}
	}
	if k.Check(core.Dialer, tr, p[:core.ProofSize-1]) {
		t.Error("a truncated proof checks")
	}
}

func TestKeysAndNoncesAreFresh(t *testing.T) {
	if *core.NewJobKey() == *core.NewJobKey() {
		t.Error("two new job keys are equal")
	}
	if core.NewNonce() == core.NewNonce() {
		t.Error("two nonces are equal")
	}
	if _, err := core.ParseJobKey(make([]byte, core.JobKeySize-1)); err == nil {
		t.Error("a short key parses")
	}
}

// bareBoot hides a bootstrap's own key, so that ExchangeJobKey goes
// through the key-value exchange as under a real engine.
type bareBoot struct{ core.Bootstrap }

func TestExchangeJobKeyGivesEveryRankRankZerosKey(t *testing.T) {
	const n = 4
	boots := boot.Group(n, t.Name())
	keys := make([]*core.JobKey, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Go(func() { keys[r], errs[r] = core.ExchangeJobKey(context.Background(), bareBoot{boots[r]}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r := 1; r < n; r++ {
		if *keys[r] != *keys[0] {
			t.Fatalf("rank %d has another key than rank 0", r)
		}
	}
	if *keys[0] == *core.JobKeyOf(boots[0]) {
		t.Error("the exchange did not draw a key of its own")
	}
	// A bootstrap that holds a key gives it without a fence.
	k, err := core.ExchangeJobKey(context.Background(), boots[1])
	if err != nil || k != core.JobKeyOf(boots[1]) {
		t.Fatalf("got %p, %v; want the group's key", k, err)
	}
}

func TestBTLEnvKeyPrefersTheEnvironmentsThenTheBootstraps(t *testing.T) {
	b := boot.Group(1, t.Name())[0]
	mine := core.NewJobKey()
	if k, _ := (core.BTLEnv{Boot: b, JobKey: mine}).Key(); k != mine {
		t.Error("BTLEnv.Key ignores JobKey")
	}
	if k, _ := (core.BTLEnv{Boot: b}).Key(); k != core.JobKeyOf(b) || k == nil {
		t.Error("BTLEnv.Key ignores the bootstrap's key")
	}
	if _, err := (core.BTLEnv{Boot: bareBoot{b}}).Key(); !errors.Is(err, core.ErrNoJobKey) {
		t.Errorf("no key anywhere: %v, want ErrNoJobKey", err)
	}
}
