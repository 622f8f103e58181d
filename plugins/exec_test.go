package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// pinnedSetup makes a directory holding a copy of the test plugin at
// "plugin" and, at "evil", a different executable that leaves the file
// "ran" when it runs; it returns the plugin's path, its pin, the evil
// executable and the mark.
func pinnedSetup(t *testing.T) (path, pin, evil, mark string) {
	t.Helper()
	dir := t.TempDir()
	path, evil, mark = filepath.Join(dir, "plugin"), filepath.Join(dir, "evil"), filepath.Join(dir, "ran")
	copyFile(t, testBin("testpolicy"), path)
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pin, err := FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, pin, evil, mark
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// swapOver renames a new name of from over path.
func swapOver(t testing.TB, from, path string) {
	tmp := path + ".swap"
	os.Remove(tmp)
	if err := os.Link(from, tmp); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// setHook sets testHookBeforeExec for the test.
func setHook(t *testing.T, f func(path string)) {
	testHookBeforeExec = f
	t.Cleanup(func() { testHookBeforeExec = nil })
}

// A pinned plugin's file replaced after its pin was checked and before it
// runs: what runs is the file that was checked (it answers the handshake
// and says it is testpolicy), never the replacement, under Open and
// under Check (config check).
func TestThePinnedFileRunsWhenAnotherIsRenamedOverIt(t *testing.T) {
	path, pin, evil, mark := pinnedSetup(t)
	good := path + ".good"
	if err := os.Link(path, good); err != nil {
		t.Fatal(err)
	}
	setHook(t, func(p string) { swapOver(t, evil, p) })
	b := Block{Kind: core.KindFlowControl, Path: path, SHA256: pin, Pos: "stack.hcl:1"}
	for name, run := range map[string]func() error{
		"Open": func() error {
			p, err := Open(context.Background(), b, Options{Deadline: testDeadline})
			if err == nil {
				if p.Plugin.Name != "testpolicy" {
					err = fmt.Errorf("the plugin that ran says it is %q", p.Plugin.Name)
				}
				p.Close()
			}
			return err
		},
		"Check": func() error { return Check(context.Background(), b, Options{}) },
	} {
		swapOver(t, good, path)
		if err := run(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s ran the file renamed over the pinned plugin (%v)", name, err)
		}
	}
}

// A file renamed over a pinned plugin over and over, as fast as a
// process can, while the plugin is checked and started many times: every
// start runs the pinned file or refuses the other for its pin, and the
// other never runs (in 4 of 40 config checks it did, before).
func TestAFileSwappedOverAPinnedPluginInATightLoopNeverRuns(t *testing.T) {
	path, pin, evil, mark := pinnedSetup(t)
	good := path + ".good"
	if err := os.Link(path, good); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The pinned file is in place most of the time, so that most
		// starts check it and then race the swap to its exec.
		for !stop.Load() {
			swapOver(t, evil, path)
			swapOver(t, good, path)
			swaps.Add(2)
			for range 2000 {
				runtime.Gosched()
			}
		}
	}()
	ran, refused := 0, 0
	b := Block{Kind: core.KindSched, Path: path, SHA256: pin}
	for i := range 40 {
		var err error
		if i%4 == 0 {
			var p *Policy
			if p, err = Open(context.Background(), b, Options{Deadline: testDeadline}); err == nil {
				p.Close()
			}
		} else {
			err = Check(context.Background(), b, Options{})
		}
		switch {
		case err == nil:
			ran++
		case strings.Contains(err.Error(), "the stack file pins"):
			refused++
		default:
			t.Errorf("start %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d swaps: the pinned plugin ran %d times, the other file was refused %d times", swaps.Load(), ran, refused)
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file renamed over the pinned plugin ran (%v)", err)
	}
}

// The plugin gets no descriptor of its executable: exec needs none once
// it has started.
func TestAPluginHoldsNoDescriptorOfItsExecutable(t *testing.T) {
	p := openTest(t, core.KindFlowControl, nil, "", Options{})
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.Pid(), fd.Name()))
		if target == testBin("testpolicy") {
			t.Errorf("the plugin holds its executable open as descriptor %s", fd.Name())
		}
	}
}

// A file written in place while the plugin starts, by someone who may
// write it, is refused once it has started: it is no longer what was
// checked.
func TestAPluginWrittenWhileItStartsIsRefused(t *testing.T) {
	path, pin, _, _ := pinnedSetup(t)
	setHook(t, func(p string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.Write([]byte{0})
		f.Close()
	})
	err := Check(context.Background(), Block{Kind: core.KindFlowControl, Path: path, SHA256: pin}, Options{})
	if err == nil || !strings.Contains(err.Error(), "was written while it started") {
		t.Fatalf("Check = %v, want the plugin refused", err)
	}
}

// A plugin started from its open file is still named after its
// executable (the kernel names it after the descriptor; the SDK renames
// it): ps, top and pgrep find it by its name.
func TestAPluginIsNamedAfterItsExecutable(t *testing.T) {
	p := openTest(t, core.KindFlowControl, nil, "", Options{})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "testpolicy" {
		t.Fatalf("the plugin process is named %q, want testpolicy", got)
	}
}
