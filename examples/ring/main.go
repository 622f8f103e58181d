// Command ring is gobtl's main example: every rank passes a token around a
// ring, then every pair of ranks exchanges messages from 1 byte to 4 MiB —
// eager and rendezvous — and checks them with CRC32. Rank 0 prints a
// summary.
//
// Under `gobtl run -np 4 -- ring` the ranks are processes; with -local N
// they are goroutines of one process over the in-process fabric.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/gobtl/gobtl"
)

func main() {
	local := flag.Int("local", 0, "run N ranks as goroutines of this process")
	rounds := flag.Int("rounds", 3, "trips of the token around the ring")
	flag.Parse()
	ctx := context.Background()
	var err error
	if *local > 0 {
		err = gobtl.RunLocal(ctx, *local, gobtl.Options{}, func(c *gobtl.Comm) error { return ring(c, *rounds) })
	} else {
		var c *gobtl.Comm
		if c, err = gobtl.Init(ctx, gobtl.Options{}); err == nil {
			err = ring(c, *rounds)
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
}

func fill(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func ring(c *gobtl.Comm, rounds int) error {
	me, n := c.Rank(), c.Size()
	start := time.Now()
	token := make([]byte, 8)
	for r := 0; r < rounds && n > 1; r++ {
		if me == 0 {
			token[0] = byte(r)
			if err := c.Send(token, 1, 0); err != nil {
				return err
			}
			if _, err := c.Recv(token, n-1, 0); err != nil {
				return err
			}
		} else {
			if _, err := c.Recv(token, me-1, 0); err != nil {
				return err
			}
			if err := c.Send(token, (me+1)%n, 0); err != nil {
				return err
			}
		}
	}
	ringTime := time.Since(start)

	// All pairs, every size, both directions at once.
	sizes := []int{1, 100, 4 << 10, 64 << 10, 1 << 20, 4 << 20}
	var bytes int64
	start = time.Now()
	for _, size := range sizes {
		var reqs []*gobtl.Request
		recv := make([][]byte, n)
		for p := 0; p < n; p++ {
			recv[p] = make([]byte, size)
			r, err := c.Irecv(recv[p], p, 1)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for p := 0; p < n; p++ {
			b := make([]byte, size)
			fill(b, me*1000+p+size)
			r, err := c.Isend(b, p, 1)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
			bytes += int64(size)
		}
		if err := c.Waitall(reqs, nil); err != nil {
			return err
		}
		for p := 0; p < n; p++ {
			want := make([]byte, size)
			fill(want, p*1000+me+size)
			if crc32.ChecksumIEEE(recv[p]) != crc32.ChecksumIEEE(want) {
				return fmt.Errorf("rank %d: %d-byte message from rank %d is corrupted", me, size, p)
			}
		}
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	if me == 0 {
		el := time.Since(start)
		fmt.Printf("ring: %d ranks, %d token trips in %v (%.2f us per hop)\n", n, rounds, ringTime.Round(time.Microsecond),
			float64(ringTime.Microseconds())/float64(max(1, rounds*n)))
		fmt.Printf("ring: all-pairs exchange of %d sizes (1 B .. 4 MiB) verified, rank 0 sent %.1f MB in %v\n",
			len(sizes), float64(bytes)/1e6, el.Round(time.Millisecond))
	}
	return nil
}
