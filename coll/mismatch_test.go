package coll_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
)

// disagreements are collectives whose rank 1 passes arguments that do not
// fit the others': another length, another operation, other counts.
var disagreements = []struct {
	name string
	call func(c *coll.Comm, nonblocking bool) error
}{
	{"allreduce of 8 and 16 bytes", func(c *coll.Comm, nb bool) error {
		n := 8 * (1 + odd(c))
		return allreduce(c, nb, make([]byte, n), make([]byte, n), sumInt64)
	}},
	{"allreduce of 8 bytes and 256 KiB, by other algorithms", func(c *coll.Comm, nb bool) error {
		n := 8 + odd(c)*(256<<10-8)
		return allreduce(c, nb, make([]byte, n), make([]byte, n), sumInt64)
	}},
	{"allreduce by sum and by max", func(c *coll.Comm, nb bool) error {
		op := coll.Sum[int64]()
		if odd(c) == 1 {
			op = coll.Max[int64]()
		}
		return allreduce(c, nb, make([]byte, 8), make([]byte, 8), op)
	}},
	{"allreduce of int64 and of float64 sums", func(c *coll.Comm, nb bool) error {
		op := coll.Sum[int64]()
		if odd(c) == 1 {
			op = coll.Sum[float64]()
		}
		return allreduce(c, nb, make([]byte, 64), make([]byte, 64), op)
	}},
	{"allgatherv whose counts differ", func(c *coll.Comm, nb bool) error {
		n := c.Size()
		counts, displs := make([]int, n), make([]int, n)
		for i := range n {
			counts[i], displs[i] = 8, 16*i
		}
		counts[1] += 8 * odd(c) // rank 1 sends 16 bytes, the others expect 8
		return c.Allgatherv(bg, make([]byte, counts[c.Rank()]), make([]byte, 16*n), counts, displs)
	}},
}

func odd(c *coll.Comm) int {
	if c.Rank() == 1 {
		return 1
	}
	return 0
}

func allreduce(c *coll.Comm, nonblocking bool, send, recv []byte, op coll.Op) error {
	if !nonblocking {
		return c.Allreduce(bg, send, recv, op)
	}
	r, err := c.Iallreduce(send, recv, op)
	if err != nil {
		return err
	}
	_, err = pmlOf(c).Wait(r)
	return err
}

// Ranks that call a collective with arguments that do not fit together
// fail it, every one of them, with ErrMismatch, and none with
// ErrTruncated: an allreduce whose ranks passed 8 and 16 bytes failed
// with ErrMismatch on rank 1 and ErrTruncated on the others (issue 30
// item 10); one of 8 bytes against 256 KiB ran other algorithms on rank
// 1 and hung the others; one by sum against max, or over int64 against
// float64, said nothing and gave each rank another result. Blocking and
// non-blocking, on 2 to 5 ranks; a job that hangs fails the harness.
func TestRanksThatDisagreeFailTheCollectiveAlikeWithErrMismatch(t *testing.T) {
	for _, d := range disagreements {
		for _, nb := range []bool{false, true} {
			if nb && strings.HasPrefix(d.name, "allgatherv") {
				continue
			}
			for n := 2; n <= 5; n++ {
				t.Run(fmt.Sprintf("%s/nonblocking=%v/np%d", d.name, nb, n), func(t *testing.T) {
					j := newJob(t, n, nil)
					defer j.close()
					errs := make([]error, n)
					j.run(t, func(c *coll.Comm) error {
						errs[c.Rank()] = d.call(c, nb)
						return nil
					})
					for r, err := range errs {
						if !errors.Is(err, coll.ErrMismatch) || errors.Is(err, core.ErrTruncated) {
							t.Errorf("rank %d: %v", r, err)
						}
					}
					if t.Failed() {
						t.FailNow()
					}
					// The job goes on: a collective whose ranks agree
					// works, past the messages the failed one left.
					j.run(t, func(c *coll.Comm) error {
						v := make([]byte, 8)
						return c.Allreduce(bg, fill(v, c.Rank(), 0), v, sumInt64)
					})
				})
			}
		}
	}
}

// A root that receives more bytes than its counts make for a rank (a
// gatherv whose rank 1 sends 16 bytes where the root's counts say 8)
// fails with ErrMismatch, as the ranks that find a short message do,
// not with the PML's ErrTruncated; the sender, done when its message
// left, cannot know.
func TestALongMessageInACollectiveIsAMismatchNotATruncation(t *testing.T) {
	j := newJob(t, 3, nil)
	defer j.close()
	errs := make([]error, 3)
	j.run(t, func(c *coll.Comm) error {
		counts, displs := []int{8, 8, 8}, []int{0, 8, 16}
		send := make([]byte, 8+8*odd(c))
		errs[c.Rank()] = c.Gatherv(bg, send, make([]byte, 24), counts, displs, 0)
		return nil
	})
	if err := errs[0]; !errors.Is(err, coll.ErrMismatch) || errors.Is(err, core.ErrTruncated) || !strings.Contains(err.Error(), "16-byte message from rank 1") {
		t.Fatalf("the root: %v", err)
	}
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("the senders: %v, %v", errs[1], errs[2])
	}
}
