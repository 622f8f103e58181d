// Command ring is gobtl's first example: N ranks started by `gobtl run`
// pass a token around a ring, then stream a large buffer around it, and
// check what arrives.
//
//	gobtl run -np 4 -- ring [-laps 1000] [-size 8MiB]
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/devinit"
	"github.com/gobtl/gobtl/pml"
)

func main() {
	laps := flag.Int("laps", 1000, "times the token goes around the ring")
	sizeFlag := flag.String("size", "8MiB", "bytes each rank streams to the next")
	flag.Parse()
	size, err := core.ParseSize(*sizeFlag)
	if err != nil {
		fail(err)
	}
	comm, err := devinit.Open(context.Background())
	if err != nil {
		fail(err)
	}
	defer comm.Close()
	if err := run(comm, *laps, int(size)); err != nil {
		fail(fmt.Errorf("rank %d: %w", comm.Rank(), err))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ring:", err)
	os.Exit(1)
}

func run(c *pml.Comm, laps, size int) error {
	me, n := c.Rank(), c.Size()
	next, prev := (me+1)%n, (me+n-1)%n

	// The token: rank 0 starts it; every rank adds its rank and passes it
	// on; after `laps` laps it must hold laps * (0+1+...+n-1).
	var tok [8]byte
	if err := c.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	for lap := 0; lap < laps; lap++ {
		if me == 0 && lap > 0 || me != 0 {
			if _, err := c.Recv(tok[:], prev, 1); err != nil {
				return err
			}
		}
		binary.LittleEndian.PutUint64(tok[:], binary.LittleEndian.Uint64(tok[:])+uint64(me))
		if err := c.Send(tok[:], next, 1); err != nil {
			return err
		}
	}
	if me == 0 {
		if _, err := c.Recv(tok[:], prev, 1); err != nil {
			return err
		}
		hops := laps * n
		got, want := binary.LittleEndian.Uint64(tok[:]), uint64(laps*n*(n-1)/2)
		if got != want {
			return fmt.Errorf("token holds %d after %d laps, want %d", got, laps, want)
		}
		el := time.Since(start)
		fmt.Printf("ring: %d ranks; the token made %d laps (%d hops) in %v, %.2f us per hop; it holds %d as it should\n",
			n, laps, hops, el.Round(time.Microsecond), float64(el.Microseconds())/float64(hops), got)
	}

	// The stream: every rank sends `size` bytes to the next and receives as
	// much from the previous, all at once; CRCs prove every byte.
	out := make([]byte, size)
	for i := range out {
		out[i] = byte(i*7 + me*13)
	}
	in := make([]byte, size)
	if err := c.Barrier(); err != nil {
		return err
	}
	start = time.Now()
	rr, err := c.Irecv(in, prev, 2)
	if err != nil {
		return err
	}
	sr, err := c.Isend(out, next, 2)
	if err != nil {
		return err
	}
	if err := c.Waitall([]*pml.Request{rr, sr}); err != nil {
		return err
	}
	el := time.Since(start)
	for i := range in {
		if in[i] != byte(i*7+prev*13) {
			return fmt.Errorf("byte %d from rank %d is %d, want %d", i, prev, in[i], byte(i*7+prev*13))
		}
	}
	var crc [4]byte
	binary.LittleEndian.PutUint32(crc[:], crc32.ChecksumIEEE(in))
	// Rank 0 gathers the CRCs to show that everyone checked.
	if me != 0 {
		return c.Send(crc[:], 0, 3)
	}
	crcs := []uint32{binary.LittleEndian.Uint32(crc[:])}
	for r := 1; r < n; r++ {
		if _, err := c.Recv(crc[:], r, 3); err != nil {
			return err
		}
		crcs = append(crcs, binary.LittleEndian.Uint32(crc[:]))
	}
	fmt.Printf("ring: every rank streamed %s to the next at once in %v (%.2f GB/s per link); received CRCs %08x, all bytes checked\n",
		core.FormatSize(int64(size)), el.Round(time.Microsecond), float64(size)/el.Seconds()/1e9, crcs)
	return nil
}
