package gobtl

import (
	"errors"
	"fmt"
	"testing"
)

// mismatchedCalls are collectives whose rank 1 passes arguments that do
// not fit the others' (issue 30 item 10), through the typed API.
var mismatchedCalls = []struct {
	name string
	call func(c *Comm) error
}{
	{"Allreduce of 1 and 2 int64s", func(c *Comm) error {
		n := 1 + c.Rank()%2
		return Allreduce(c, make([]int64, n), make([]int64, n), Sum)
	}},
	{"Allreduce by Sum and by Max", func(c *Comm) error {
		op := Sum
		if c.Rank() == 1 {
			op = Max
		}
		return Allreduce(c, make([]int64, 4), make([]int64, 4), op)
	}},
	{"Iallreduce of 1 and 32768 float64s", func(c *Comm) error {
		n := 1 + (c.Rank()%2)*32767
		r, err := Iallreduce(c, make([]float64, n), make([]float64, n), Sum)
		if err != nil {
			return err
		}
		_, err = c.Wait(r)
		return err
	}},
}

// Over RunLocal, every rank of a collective whose ranks disagree fails
// it with ErrMismatch, and none with ErrTruncated, which the ranks that
// got a long message reported before; the job goes on.
func TestACollectiveWhoseRanksDisagreeFailsAlikeOnEveryRank(t *testing.T) {
	for _, mc := range mismatchedCalls {
		for _, n := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/np%d", mc.name, n), func(t *testing.T) {
				errs := make([]error, n)
				run(t, n, Options{}, func(c *Comm) error {
					errs[c.Rank()] = mc.call(c)
					return Allreduce(c, []int64{1}, make([]int64, 1), Sum)
				})
				for r, err := range errs {
					if !errors.Is(err, ErrMismatch) || errors.Is(err, ErrTruncated) {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}
