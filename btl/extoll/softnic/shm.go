package softnic

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

var runtimeGosched = runtime.Gosched

// createMapping creates (or truncates) the file at path, sizes it and maps
// it shared.
func createMapping(path string, size int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(path)
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}

// openMapping maps an existing file shared.
func openMapping(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}

func unmap(mem []byte) { _ = unix.Munmap(mem) }
