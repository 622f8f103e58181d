package owner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTempDirLeavesRoomForASocket(t *testing.T) {
	short := t.TempDir()
	if len(short)+socketRoom > maxSocketPath {
		t.Skipf("the test's own temp directory %q is already too long", short)
	}
	t.Setenv("TMPDIR", short)
	if got := TempDir(); got != short {
		t.Fatalf("TempDir() = %q with TMPDIR=%q", got, short)
	}
	long := filepath.Join(short, strings.Repeat("x", maxSocketPath))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	if got := TempDir(); len(got)+socketRoom > maxSocketPath {
		t.Fatalf("TempDir() = %q with a %d-byte TMPDIR: no room for a socket", got, len(long))
	}
}

func TestTheOwnerOfThisProcessIsAlive(t *testing.T) {
	if !Self().Alive() {
		t.Fatal("this process is not alive by its own owner")
	}
	if (Owner{Pid: Self().Pid, Start: Self().Start + 1}).Alive() {
		t.Fatal("an owner with another start time is alive: a reused pid would keep files forever")
	}
}
