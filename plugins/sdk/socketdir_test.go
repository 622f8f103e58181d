package sdk

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtl/gobtl/plugins/internal/wire"
)

// A plugin whose host is gone removes the socket directory the host made
// (gobtl-plugin-*, holding sockets only) and nothing else.
func TestRemoveSocketDirRemovesOnlyAGobtlSocketDirectory(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string, withFile bool) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", filepath.Join(d, "plugin1"))
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		if withFile {
			if err := os.WriteFile(filepath.Join(d, "data"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	sockets := mk(wire.SocketDirPrefix+"1", false)
	foreign := mk("elsewhere", false)
	mixed := mk(wire.SocketDirPrefix+"2", true)
	for _, d := range []string{sockets, foreign, mixed, "", filepath.Join(tmp, wire.SocketDirPrefix+"missing")} {
		removeSocketDir(d)
	}
	if _, err := os.Stat(sockets); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", sockets, err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "plugin1")); err != nil {
		t.Errorf("a directory gobtl did not make lost its socket: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mixed, "data")); err != nil {
		t.Errorf("a directory holding more than sockets lost its file: %v", err)
	}
}
