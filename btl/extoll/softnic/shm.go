package softnic

import (
	"fmt"
	"math"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/internal/jobfile"
)

var runtimeGosched = runtime.Gosched

// createMapping makes a new file in dir named prefix, a random part and
// suffix — exclusively, 0600, through no link, its size bytes reserved
// (jobfile.Create) — and maps it shared. Peers learn the name from the
// published address (Addr.Mailbox, Addr.ATT), never from the job id.
func createMapping(dir, prefix, suffix string, size int) ([]byte, string, error) {
	f, err := jobfile.Create(dir, prefix, suffix, int64(size))
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(f.Name())
		return nil, "", fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return mem, f.Name(), nil
}

// openMapping maps a peer's file shared, if it is a file of this user
// that nobody else may open, reached through no link (jobfile.Open), and
// holds at least min bytes.
func openMapping(path string, min int) ([]byte, error) {
	f, err := jobfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < int64(min) || st.Size() > int64(math.MaxInt) {
		return nil, fmt.Errorf("%s is %d bytes, want at least %d", path, st.Size(), min)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}

func unmap(mem []byte) { _ = unix.Munmap(mem) }
