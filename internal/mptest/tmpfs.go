package mptest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// EnvTmpfs names, in the child SmallTmpfs starts, the directory its tmpfs
// covers.
const EnvTmpfs = "GOBTL_MPTEST_TMPFS"

// SmallTmpfs runs the test called test of this test binary again, in a
// child process with a mount namespace of its own in which a tmpfs of
// size bytes (mount's size= option: "1m") covers a fresh directory; the
// child finds the directory with TmpfsDir. Nothing outside the child sees
// the mount, and it goes with the child. SmallTmpfs returns the child's
// output and how it ended; it skips t, saying why, unless the process is
// root and unshare(1) and mount(8) are there.
func SmallTmpfs(t *testing.T, size, test string) ([]byte, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a tmpfs in a mount namespace of its own needs root (unshare -m, mount -t tmpfs)")
	}
	for _, tool := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s(8) to make a small tmpfs with: %v", tool, err)
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount -t tmpfs -o size="$1",mode=1777 gobtl-test "$2" && shift 2 && exec "$@"`,
		"sh", size, dir, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), EnvTmpfs+"="+dir)
	return cmd.CombinedOutput()
}

// TmpfsDir is the directory the tmpfs of SmallTmpfs covers, in the child
// it runs; elsewhere "", and the test that asks is the child's half,
// which then has nothing to do.
func TmpfsDir() string { return os.Getenv(EnvTmpfs) }
