package jobfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Reserve sizes f to size bytes with every page of it allocated, as
// posix_fallocate does: fallocate(2), or where the filesystem has none a
// write into each block. A truncate alone reserves nothing on tmpfs —
// the pages come at the first touch, and a page the filesystem cannot
// supply then is a SIGBUS in whoever touches it. Out of space, the error
// says how much was needed and how much is free (statfs), and wraps
// ENOSPC.
func Reserve(f *os.File, size int64) error {
	fd := int(f.Fd())
	err := fallocate(fd, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = writeBlocks(fd, size)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		var fs unix.Statfs_t
		if unix.Fstatfs(fd, &fs) == nil {
			free := int64(fs.Bavail) * int64(fs.Bsize)
			total := int64(fs.Blocks) * int64(fs.Bsize)
			return fmt.Errorf("jobfile: reserve %s: needs %s, %s free of %s: %w",
				f.Name(), human(size), human(free), human(total), err)
		}
	}
	return fmt.Errorf("jobfile: reserve %d bytes for %s: %w", size, f.Name(), err)
}

func fallocate(fd int, size int64) error {
	for {
		err := unix.Fallocate(fd, 0, 0, size)
		if err != unix.EINTR {
			return err
		}
	}
}

// writeBlocks is posix_fallocate's emulation: the file's size, then a
// zero byte written into every block so that the filesystem allocates it.
func writeBlocks(fd int, size int64) error {
	if err := unix.Ftruncate(fd, size); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	bs := max(int64(st.Blksize), 512)
	zero := []byte{0}
	for off := int64(0); off < size; off += bs {
		if _, err := unix.Pwrite(fd, zero, off); err != nil {
			return err
		}
	}
	return nil
}

// human renders n bytes exactly and, from a KiB up, in binary units.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, u)
}
