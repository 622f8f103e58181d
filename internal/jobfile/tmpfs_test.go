package jobfile_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtl/gobtl/internal/jobfile"
	"github.com/gobtl/gobtl/internal/mptest"
)

// On a 1 MiB tmpfs, reserving 4 MiB is an error at once that says what
// was needed and what is free, and leaves no file; 256 KiB fits, and its
// bytes can be written. (With a truncate instead of the reservation the
// 4 MiB file is made, and a mapping of it dies of SIGBUS at the first
// page the tmpfs cannot supply: issue 30 item 7.)
func TestReservingMoreThanTheTmpfsHoldsIsAClearError(t *testing.T) {
	out, err := mptest.SmallTmpfs(t, "1m", "TestReserveOnASmallTmpfs")
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReserveOnASmallTmpfs") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// TestReserveOnASmallTmpfs is the child's half of the test above.
func TestReserveOnASmallTmpfs(t *testing.T) {
	dir := mptest.TmpfsDir()
	if dir == "" {
		t.Skip("the child of TestReservingMoreThanTheTmpfsHoldsIsAClearError")
	}
	_, err := jobfile.Create(dir, "big-", "", 4<<20)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "needs 4194304 bytes (4.0 MiB)") ||
		!strings.Contains(err.Error(), "free of 1048576 bytes (1.0 MiB)") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	f, err := jobfile.Create(dir, "small-", "", 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 256<<10)
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(fmt.Errorf("writing the reserved bytes: %w", err))
	}
}
