package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
)

// recorder is a built-in flow-control policy for the tests: it records the
// events it observes and answers each with a decision marked Value < 0, so
// a test can tell the fallback's decisions from the plugin's.
type recorder struct {
	mu   sync.Mutex
	seen []int64
}

var fallbackRec = &recorder{}

func (r *recorder) Setup(core.FlowInfo) (core.FlowSetup, error) {
	return core.FlowSetup{Scheme: core.FlowCredits, Quota: 1, MaxQuota: 4, CreditThreshold: 1}, nil
}

func (r *recorder) Observe(es []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		r.seen = append(r.seen, e.Value)
		out = append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: e.Peer, Value: -1 - e.Value})
	}
	return out
}

func (r *recorder) values() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seen...)
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.seen = nil
	r.mu.Unlock()
}

func init() {
	core.Register(&core.Component{Kind: core.KindFlowControl, Name: "test_recorder",
		Doc: "records events (tests only)", NewPolicy: func(core.Params) (any, error) { return fallbackRec, nil }})
}

// useRecorderFallback makes test_recorder the flow-control fallback.
func useRecorderFallback(t *testing.T) {
	old := FallbackFlowControl
	FallbackFlowControl = map[core.FlowResource]string{core.ResourcePostedBuffers: "test_recorder"}
	fallbackRec.reset()
	t.Cleanup(func() { FallbackFlowControl = old })
}

// testParams builds the body of a testpolicy block.
func testParams(t testing.TB, kv map[string]string) core.Params {
	t.Helper()
	schema, err := Schema(core.KindFlowControl, "", testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := core.NewParams(schema)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		if err := p.SetText(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// openTest opens testpolicy as kind with the given body.
func openTest(t testing.TB, kind core.Kind, kv map[string]string, onFailure string, o Options) *Policy {
	t.Helper()
	b := Block{Kind: kind, Path: testBin("testpolicy"), Params: testParams(t, kv), OnFailure: onFailure, Pos: "test.hcl:7"}
	if o.Deadline == 0 {
		o.Deadline = testDeadline
	}
	p, err := Open(context.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var ibInfo = core.FlowInfo{Resource: core.ResourcePostedBuffers, Ranks: 5, Senders: 4, BufferSize: 2048}

// collect polls Observe(nil) until n decisions arrived.
func collect(t testing.TB, fc core.FlowControl, out []core.FlowDecision, n int) []core.FlowDecision {
	t.Helper()
	waitFor(t, "decisions", 20*time.Second, func() bool {
		out = fc.Observe(nil, out)
		return len(out) >= n
	})
	return out
}

func TestAPluginAnswersEveryEventInOrder(t *testing.T) {
	log, _ := testLogger()
	p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log})
	fc := p.FlowControl()
	if fc == nil {
		t.Fatalf("Open(flow_control) gave a %T", p.Impl())
	}
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var out []core.FlowDecision
	batch := make([]core.FlowEvent, 0, 37)
	for i := 0; i < n; i++ {
		batch = append(batch, core.FlowEvent{Kind: core.FlowActivity, Peer: int32(i % 4), Value: int64(i)})
		if len(batch) == cap(batch) || i == n-1 {
			out = fc.Observe(batch, out)
			batch = batch[:0]
		}
	}
	out = collect(t, fc, out, n)
	if len(out) != n {
		t.Fatalf("got %d decisions for %d events", len(out), n)
	}
	for i, d := range out {
		if d.Value != int64(i) || d.Peer != int32(i%4) {
			t.Fatalf("decision %d = %+v, want the echo of event %d", i, d, i)
		}
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err() = %v on a healthy plugin", err)
	}
}

func TestEveryKindRoundTripsThroughItsService(t *testing.T) {
	log, _ := testLogger()
	t.Run("recvbuf", func(t *testing.T) {
		rb := openTest(t, core.KindRecvBuf, nil, "", Options{Log: log}).RecvBuffers()
		s, err := rb.Setup(core.RecvInfo{Peers: 3, EagerLimit: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Queues) != 2 || s.Queues[1].BufSize != 4096 || s.Queues[0].Kind != core.QueuePerPeer {
			t.Fatalf("Setup = %+v", s)
		}
		var out []core.RecvDecision
		out = rb.Observe([]core.RecvEvent{{Kind: core.RecvLimit, Queue: 1, Posted: 3, Value: 42}}, out)
		waitFor(t, "a recvbuf decision", 20*time.Second, func() bool { out = rb.Observe(nil, out); return len(out) == 1 })
		if out[0] != (core.RecvDecision{Kind: core.RecvGrow, Queue: 1, Value: 42}) {
			t.Fatalf("decision = %+v", out[0])
		}
	})
	t.Run("sched", func(t *testing.T) {
		sc := openTest(t, core.KindSched, nil, "", Options{Log: log}).Scheduler()
		s, err := sc.Setup(core.SchedInfo{Peer: 1, Subchannels: []core.SubchannelInfo{{Name: "a"}, {Name: "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Weights) != 2 || s.TotalWeight != 1 || s.Large != core.SchedWeightedStriping {
			t.Fatalf("Setup = %+v", s)
		}
		var out []core.SchedDecision
		out = sc.Observe([]core.SchedEvent{{Kind: core.SchedStripeDone, Peer: 1, Sub: 1, Last: true, Msg: 9, Bytes: 4096, Time: time.Microsecond}}, out)
		waitFor(t, "a sched decision", 20*time.Second, func() bool { out = sc.Observe(nil, out); return len(out) == 1 })
		if out[0] != (core.SchedDecision{Kind: core.SchedSetWeight, Peer: 1, Sub: 1, Weight: 4096}) {
			t.Fatalf("decision = %+v", out[0])
		}
	})
}

func TestARefusedSetupIsAnAnswerNotAFailure(t *testing.T) {
	log, _ := testLogger()
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "refuse"}, "", Options{Log: log})
	_, err := p.FlowControl().Setup(ibInfo)
	if err == nil || !strings.Contains(err.Error(), "testpolicy refuses") {
		t.Fatalf("Setup error = %v, want the policy's refusal", err)
	}
	if p.Err() != nil {
		t.Fatalf("the plugin counts as failed after a refusal: %v", p.Err())
	}
}

// killMidStream streams events to an echo plugin, kills it with SIGKILL
// halfway and checks that every event was either answered by the plugin
// or observed by the fallback, and that Observe never blocked.
func TestSIGKILLMidStreamFallsBackAndLosesNoEvent(t *testing.T) {
	useRecorderFallback(t)
	log, logs := testLogger()
	p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log})
	fc := p.FlowControl()
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	var out []core.FlowDecision
	var slowest time.Duration
	ev := make([]core.FlowEvent, 16)
	for i := 0; i < n; i += len(ev) {
		for j := range ev {
			ev[j] = core.FlowEvent{Kind: core.FlowActivity, Peer: 1, Value: int64(i + j)}
		}
		if i == n/2 {
			if err := syscall.Kill(p.proc.pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		out = fc.Observe(ev, out)
		slowest = max(slowest, time.Since(start))
	}
	select {
	case <-p.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the killed plugin was never noticed")
	}
	out = fc.Observe(nil, out) // the fallback replays what the plugin never answered
	answered := map[int64]bool{}
	fromFallback := 0
	for _, d := range out {
		if d.Value < 0 {
			fromFallback++
			answered[-1-d.Value] = true
		} else {
			answered[d.Value] = true
		}
	}
	for i := int64(0); i < n; i++ {
		if !answered[i] {
			t.Fatalf("event %d was neither answered by the plugin nor seen by the fallback (%d answered)", i, len(answered))
		}
	}
	if fromFallback == 0 {
		t.Fatal("no decision came from the fallback")
	}
	// Decisions keep flowing from the fallback.
	out = fc.Observe([]core.FlowEvent{{Kind: core.FlowBacklogged, Peer: 2, Value: 7}}, out[:0])
	if len(out) != 1 || out[0].Value != -8 {
		t.Fatalf("after the fallback: decisions %+v, want the fallback's answer to the new event", out)
	}
	if s, err := fc.Setup(ibInfo); err != nil || s.MaxQuota != 4 {
		t.Fatalf("Setup after the failure = %+v, %v; want the fallback's", s, err)
	}
	if !strings.Contains(logs.String(), "switched to the built-in fallback") || !strings.Contains(logs.String(), `"fallback":"test_recorder"`) {
		t.Fatalf("the fallback is not in the log:\n%s", logs.String())
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "test.hcl:7") {
		t.Fatalf("Err() = %v, want the failure naming the block", err)
	}
	t.Logf("slowest Observe while the plugin died: %v", slowest)
}

func TestAHungPluginMissesItsDeadline(t *testing.T) {
	useRecorderFallback(t)
	log, logs := testLogger()
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "hang", "after": "2"}, "", Options{Log: log, Deadline: 200 * time.Millisecond})
	fc := p.FlowControl()
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	var out []core.FlowDecision
	for i := 0; i < 5; i++ {
		out = fc.Observe([]core.FlowEvent{{Kind: core.FlowActivity, Peer: 0, Value: int64(i)}}, out)
		waitFor(t, "the batch to go out", 10*time.Second, func() bool {
			px := fc.(*pluginPolicy[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision]).proxy
			px.mu.Lock()
			defer px.mu.Unlock()
			return len(px.pend) == 0
		})
	}
	select {
	case <-p.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the hung plugin was never noticed")
	}
	if !strings.Contains(p.Err().Error(), "no answer") {
		t.Fatalf("Err() = %v, want a missed deadline", p.Err())
	}
	out = fc.Observe(nil, out)
	got := fallbackRec.values()
	if len(got) < 3 {
		t.Fatalf("the fallback replayed %v, want the batches the plugin never answered", got)
	}
	if !strings.Contains(logs.String(), "switched to the built-in fallback") {
		t.Fatalf("log:\n%s", logs.String())
	}
	waitFor(t, "the hung process to be killed", 10*time.Second, func() bool {
		return syscall.Kill(p.proc.pid(), 0) != nil
	})
}

func TestAPanickingPolicyIsReportedAsSuch(t *testing.T) {
	useRecorderFallback(t)
	log, logs := testLogger()
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "panic"}, "", Options{Log: log})
	fc := p.FlowControl()
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	fc.Observe([]core.FlowEvent{{Kind: core.FlowActivity}}, nil)
	select {
	case <-p.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the panic was never noticed")
	}
	if !strings.Contains(p.Err().Error(), "panicked") {
		t.Fatalf("Err() = %v", p.Err())
	}
	// The plugin's own log line with the stack comes through zerolog.
	waitFor(t, "the plugin's panic log", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), `"plugin":"testpolicy"`) && strings.Contains(logs.String(), "policy panicked")
	})
}

func TestOnFailureAbortStopsProposingAndCallsAbort(t *testing.T) {
	log, _ := testLogger()
	aborted := make(chan error, 1)
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "crash", "after": "1"}, "abort",
		Options{Log: log, Abort: func(err error) { aborted <- err }})
	fc := p.FlowControl()
	if _, err := fc.Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	var out []core.FlowDecision
	out = fc.Observe([]core.FlowEvent{{Value: 1}}, out)
	out = collect(t, fc, out, 1)
	fc.Observe([]core.FlowEvent{{Value: 2}}, nil) // this one kills it
	var err error
	select {
	case err = <-aborted:
	case <-time.After(20 * time.Second):
		t.Fatal("Abort was not called")
	}
	for _, want := range []string{"test.hcl:7", `flow_control policy`, `on_failure = "abort"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("abort error %q lacks %q", err, want)
		}
	}
	if got := fc.Observe([]core.FlowEvent{{Value: 3}}, nil); len(got) != 0 {
		t.Fatalf("an aborted policy proposed %+v", got)
	}
	if _, err := fc.Setup(ibInfo); err == nil {
		t.Fatal("Setup on an aborted policy succeeded")
	}
}

func TestWithoutABuiltinFallbackThePolicyHolds(t *testing.T) {
	old := FallbackFlowControl
	FallbackFlowControl = map[core.FlowResource]string{core.ResourcePostedBuffers: "no_such_policy"}
	t.Cleanup(func() { FallbackFlowControl = old })
	log, logs := testLogger()
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "crash"}, "", Options{Log: log})
	fc := p.FlowControl()
	first, err := fc.Setup(ibInfo)
	if err != nil {
		t.Fatal(err)
	}
	fc.Observe([]core.FlowEvent{{Value: 1}}, nil)
	<-p.Failed()
	if got := fc.Observe([]core.FlowEvent{{Value: 2}}, nil); len(got) != 0 {
		t.Fatalf("hold proposed %+v", got)
	}
	if s, err := fc.Setup(ibInfo); err != nil || s != first {
		t.Fatalf("hold's Setup = %+v, %v; want the plugin's last answer %+v", s, err, first)
	}
	if !strings.Contains(logs.String(), "hold") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

func TestTheSocketDirectoryGoesOnceThePluginIsConnected(t *testing.T) {
	log, _ := testLogger()
	for _, kill := range []bool{false, true} {
		p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log})
		// A host killed outright from here on leaves no directory.
		dir := p.proc.sockDir
		if !strings.HasPrefix(filepath.Base(dir), "gobtl-plugin-") {
			t.Fatalf("socket directory %s", dir)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the socket directory %s is there after the handshake: %v", dir, err)
		}
		if kill {
			syscall.Kill(p.proc.pid(), syscall.SIGKILL)
			p.FlowControl().Setup(ibInfo) // notices the death
		} else if _, err := p.FlowControl().Setup(ibInfo); err != nil {
			t.Fatalf("the plugin without its socket's name: %v", err)
		}
		p.Close()
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after Close (killed first: %v) the socket directory %s is there: %v", kill, dir, err)
		}
	}
}

func TestBadInputGivesOneClearError(t *testing.T) {
	log, _ := testLogger()
	for _, c := range badBlocks(t) {
		t.Run(c.name, func(t *testing.T) {
			c.b.Pos = "stack.hcl:3"
			p, err := Open(context.Background(), c.b, Options{Log: log, StartTimeout: 5 * time.Second})
			if err == nil {
				p.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n lacks %q", err, w)
				}
			}
		})
	}
}

// badBlock is a policy block Open must refuse, and what its one error
// must say.
type badBlock struct {
	name string
	b    Block
	want []string
}

// badBlocks are the mistakes a stack file's policy block can make: a
// plugin missing, not a plugin, not executable, of the wrong kind or
// protocol, refusing its parameters, not the one pinned; a block naming
// no policy, two, or an unknown one.
func badBlocks(t *testing.T) []badBlock {
	t.Helper()
	dir := recvBufOnlyDir(t)
	sum, err := FileSHA256(testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	badStep := testParams(t, nil)
	badStep.Set("step", int64(0))
	wrongSchema := core.MustParams([]core.Param{{Name: "bogus", Type: core.ParamInt}})
	wrongSchema.Set("bogus", int64(3))
	return []badBlock{
		{"a missing plugin names every path searched",
			Block{Kind: core.KindFlowControl, Plugin: "nosuch", PluginDir: "pdir", Dir: "/etc/stack"},
			[]string{"stack.hcl:3", `policy "flow_control"`, `"nosuch" not found`, "/etc/stack/pdir/nosuch", "bin/plugins/nosuch"}},
		{"an executable that is not a plugin",
			Block{Kind: core.KindFlowControl, Path: testBin("notplugin")},
			[]string{"stack.hcl:3", "is not a gobtl policy plugin", "hello, I am not a plugin"}},
		{"a file that is not executable",
			Block{Kind: core.KindFlowControl, Plugin: "readme", PluginDir: dir},
			[]string{"stack.hcl:3", "not executable"}},
		{"a plugin of the wrong kind",
			Block{Kind: core.KindFlowControl, Plugin: "testpolicy-recvbuf", PluginDir: dir},
			[]string{"stack.hcl:3", "serves recvbuf policies, not flow_control"}},
		{"a plugin speaking another protocol",
			Block{Kind: core.KindFlowControl, Path: testBin("wrongproto")},
			[]string{"stack.hcl:3", fmt.Sprintf("speaks gobtl plugin protocol 99, this gobtl speaks %d", wire.ProtocolVersion)}},
		{"a value the plugin's Check refuses",
			Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), Params: badStep},
			[]string{"stack.hcl:3", "bad configuration", "step must be positive"}},
		{"a parameter the plugin does not know",
			Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), Params: wrongSchema},
			[]string{"stack.hcl:3", `unknown parameter "bogus"`}},
		{"a checksum that does not match",
			Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), SHA256: strings.Repeat("0", 64)},
			[]string{"stack.hcl:3", "has sha256 " + sum, "pins 0000"}},
		{"a malformed checksum",
			Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), SHA256: "abc"},
			[]string{"stack.hcl:3", "not 64 hex digits"}},
		{"an unknown built-in lists those compiled in",
			Block{Kind: core.KindFlowControl, Builtin: "nosuch"},
			[]string{"stack.hcl:3", `no built-in flow_control policy "nosuch"`, "test_recorder"}},
		{"both builtin and plugin",
			Block{Kind: core.KindFlowControl, Builtin: "a", Plugin: "b"},
			[]string{"stack.hcl:3", "both builtin and plugin"}},
		{"neither builtin nor plugin",
			Block{Kind: core.KindFlowControl},
			[]string{"stack.hcl:3", "names no policy"}},
		{"an unknown on_failure",
			Block{Kind: core.KindFlowControl, Builtin: "test_recorder", OnFailure: "retry"},
			[]string{"stack.hcl:3", `on_failure = "retry"`}},
		{"a kind that is not a policy",
			Block{Kind: core.KindBTL, Builtin: "x"},
			[]string{"stack.hcl:3", `"btl" is not a policy kind`}},
		{"a plugin name with a slash",
			Block{Kind: core.KindFlowControl, Plugin: "../x"},
			[]string{"stack.hcl:3", "not a file name"}},
	}
}

// recvBufOnlyDir is a plugin directory holding testpolicy under a name
// that serves only recvbuf, and a file that is not executable.
func recvBufOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "testpolicy-recvbuf"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "readme"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAPinnedChecksumThatMatchesOpens(t *testing.T) {
	sum, err := FileSHA256(testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	log, _ := testLogger()
	p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), SHA256: sum}, Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

func TestDiscoverySearchOrder(t *testing.T) {
	a, b, prefix := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.WriteFile(filepath.Join(d, "p"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer func(f func() (string, error)) { executable = f }(executable)
	executable = func() (string, error) { return filepath.Join(prefix, "bin", "gobtl"), nil }
	t.Setenv(EnvPath, b+string(os.PathListSeparator)+a)
	dirs := SearchDirs("rel", "/cfg")
	want := []string{"/cfg/rel", b, a, filepath.Join(prefix, "bin", "plugins"), filepath.Join(prefix, "lib", "gobtl", "plugins"), DefaultDir}
	if strings.Join(dirs, "|") != strings.Join(want, "|") {
		t.Fatalf("SearchDirs = %v, want %v", dirs, want)
	}
	got, err := Find("p", dirs)
	if err != nil || got != filepath.Join(b, "p") {
		t.Fatalf("Find = %q, %v; want the first directory in $%s that has it", got, err, EnvPath)
	}
	cands, err := Candidates(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 2 || cands[0].Shadowed || !cands[1].Shadowed {
		t.Fatalf("Candidates = %+v, want the second p shadowed", cands)
	}
}

// A plugin installed under the prefix of the running executable
// (PREFIX/lib/gobtl/plugins beside PREFIX/bin/gobtl, as make install lays
// it out) is found from any working directory, and a misspelt name gets
// the nearest one found.
func TestAPluginInstalledBesideTheCommandIsFoundFromAnyDirectory(t *testing.T) {
	prefix := t.TempDir()
	lib := filepath.Join(prefix, "lib", "gobtl", "plugins")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "aimd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(f func() (string, error)) { executable = f }(executable)
	executable = func() (string, error) { return filepath.Join(prefix, "bin", "gobtl"), nil }
	t.Setenv(EnvPath, "")
	t.Chdir(t.TempDir())
	got, err := Find("aimd", SearchDirs("", ""))
	if err != nil || got != filepath.Join(lib, "aimd") {
		t.Fatalf("Find = %q, %v; want %s", got, err, filepath.Join(lib, "aimd"))
	}
	_, err = Find("aimdd", SearchDirs("", ""))
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.Suggestion != "aimd" || !strings.Contains(err.Error(), `Did you mean "aimd"?`) {
		t.Fatalf("Find of a misspelt name = %v, want a did-you-mean", err)
	}
}

// Check configures a plugin whose pin matches and stops it; the plugin's
// own check of a value is a ConfigError. (A pin that does not match runs
// nothing: TestNoExecutableRunsWhosePinDoesNotMatch.)
func TestCheckConfiguresAPinnedPluginAndReportsItsRefusal(t *testing.T) {
	sum, err := FileSHA256(testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	b := Block{Kind: core.KindSched, Path: testBin("testpolicy"), SHA256: sum, Params: testParams(t, map[string]string{"step": "2"})}
	if err := Check(context.Background(), b, Options{}); err != nil {
		t.Fatalf("Check of a good block: %v", err)
	}
	b.Params = core.Params{}
	b.Decode = func(schema []core.Param) (core.Params, error) {
		p := core.MustParams(schema)
		// The schema cannot carry the plugin's Check: the value reaches
		// the plugin, which refuses it.
		if _, ok := p.Param("step"); !ok {
			t.Fatal("the plugin's schema has no step")
		}
		if err := p.Set("step", int64(0)); err != nil {
			t.Fatal(err)
		}
		return p, nil
	}
	err = Check(context.Background(), b, Options{})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Msg != "step: step must be positive" {
		t.Fatalf("Check of a value the plugin refuses = %v, want a ConfigError", err)
	}
}

func TestSchemaIsThePluginsOwn(t *testing.T) {
	schema, err := Schema(core.KindSched, "", testBin("testpolicy"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := core.NewParams(schema)
	if err != nil {
		t.Fatal(err)
	}
	if p.String("mode") != "echo" || p.Int("step") != 1 {
		t.Fatalf("defaults: mode %q step %d", p.String("mode"), p.Int("step"))
	}
	if err := p.SetText("mode", "nonsense"); err == nil {
		t.Fatal("the enum did not come across")
	}
	if _, err := Schema(core.KindSched, "", testBin("notplugin")); err == nil {
		t.Fatal("Schema of a non-plugin succeeded")
	}
}

func TestProbeDescribesThePlugin(t *testing.T) {
	log, _ := testLogger()
	info, err := Probe(context.Background(), testBin("testpolicy"), log)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "testpolicy" || info.Version != "0.0.1-test" || len(info.Kinds) != 3 || info.Protocol != wire.ProtocolVersion {
		t.Fatalf("Probe = %+v", info)
	}
}

func TestABuiltinIsTheObjectItself(t *testing.T) {
	p, err := Open(context.Background(), Block{Kind: core.KindFlowControl, Builtin: "test_recorder"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.FlowControl() != core.FlowControl(fallbackRec) || p.Plugin != nil || p.Failed() != nil {
		t.Fatalf("builtin policy = %+v", p)
	}
	p.Close()
}

func TestABodyDecodedOnceThePluginRuns(t *testing.T) {
	log, _ := testLogger()
	var got []core.Param
	b := Block{Kind: core.KindFlowControl, Path: testBin("testpolicy"), Pos: "stack.hcl:9",
		Decode: func(schema []core.Param) (core.Params, error) {
			got = schema
			return core.Params{}, errors.New("stack.hcl:11:3: Unsupported argument; An argument named \"stpe\" is not expected here.")
		}}
	_, err := Open(context.Background(), b, Options{Log: log})
	if err == nil || !strings.Contains(err.Error(), "stack.hcl:11:3") || !strings.Contains(err.Error(), "bad configuration body") {
		t.Fatalf("Open = %v, want the decoder's diagnostic", err)
	}
	if len(got) == 0 || got[0].Name != "mode" {
		t.Fatalf("Decode got schema %+v, want testpolicy's", got)
	}
	b.Decode = func(schema []core.Param) (core.Params, error) {
		p := core.MustParams(schema)
		return p, p.SetText("mode", "silent")
	}
	p, err := Open(context.Background(), b, Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fc := p.FlowControl()
	fc.Setup(ibInfo)
	fc.Observe([]core.FlowEvent{{Value: 1}}, nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out := fc.Observe(nil, nil); len(out) != 0 {
		t.Fatalf("the decoded body did not reach the plugin: mode silent answered %+v", out)
	}
}

func TestWhatAPluginPrintsReachesTheLog(t *testing.T) {
	log, logs := testLogger()
	p := openTest(t, core.KindFlowControl, map[string]string{"mode": "chatty"}, "", Options{Log: log})
	fc := p.FlowControl()
	fc.Setup(ibInfo)
	fc.Observe([]core.FlowEvent{{Value: 1}}, nil)
	waitFor(t, "the plugin's stdout in the log", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), `"stream":"stdout"`) && strings.Contains(logs.String(), "testpolicy: batch 1")
	})
}

// A batch system's per-job TMPDIR can be longer than a unix socket's path
// may be (107 bytes); the plugin's socket then goes to /tmp instead of
// failing the handshake with a plugin that "printed nothing".
func TestALongTMPDIRDoesNotBreakThePluginSocket(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 100))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	log, _ := testLogger()
	p := openTest(t, core.KindFlowControl, nil, "", Options{Log: log})
	if _, err := p.FlowControl().Setup(ibInfo); err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
}
