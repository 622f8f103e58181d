package gobtl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gobtl/gobtl"
)

// A sum over the ranks of a job: every rank gets it.
func ExampleAllreduce() {
	err := gobtl.RunLocal(context.Background(), 4, gobtl.Options{}, func(c *gobtl.Comm) error {
		mine := []float64{float64(c.Rank() + 1), 1}
		sum := make([]float64, 2)
		if err := gobtl.Allreduce(c, mine, sum, gobtl.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("1+2+3+4 =", sum[0], "over", sum[1], "ranks")
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: 1+2+3+4 = 10 over 4 ranks
}

// Rows of a 2×3 grid of ranks: Split by row, then a maximum along each
// row, gathered to rank 0 to print.
func ExampleComm_Split() {
	err := gobtl.RunLocal(context.Background(), 6, gobtl.Options{}, func(c *gobtl.Comm) error {
		row, col := c.Rank()/3, c.Rank()%3
		rowComm, err := c.Split(row, col)
		if err != nil {
			return err
		}
		best := []int{c.Rank() * 10}
		if err := gobtl.Allreduce(rowComm, best, best, gobtl.Max); err != nil {
			return err
		}
		all := make([]byte, c.Size())
		if err := c.Gather([]byte{byte(best[0])}, all, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("row maxima seen by each rank:", all)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: row maxima seen by each rank: [20 20 20 50 50 50]
}

// A non-blocking allreduce overlapped with point-to-point work; the
// request completes through the usual Wait.
func ExampleIallreduce() {
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(c *gobtl.Comm) error {
		counts := []int64{int64(c.Rank()), 1}
		total := make([]int64, 2)
		req, err := gobtl.Iallreduce(c, counts, total, gobtl.Sum)
		if err != nil {
			return err
		}
		// Meanwhile, pass a token round the ring.
		token := make([]byte, 1)
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		if _, err := c.Sendrecv([]byte{byte(c.Rank())}, next, 0, token, prev, 0); err != nil {
			return err
		}
		if _, err := c.Wait(req); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("sum of ranks", total[0], "of", total[1], "- token from rank", token[0])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: sum of ranks 3 of 3 - token from rank 2
}

// An operation of the program's own that does not commute: the ranks'
// values are combined in rank order, here concatenating digits.
func ExampleAllreduceFunc() {
	type number struct{ Value, Scale int64 } // Value with Scale = 10^digits
	err := gobtl.RunLocal(context.Background(), 4, gobtl.Options{}, func(c *gobtl.Comm) error {
		mine := []number{{int64(c.Rank() + 1), 10}}
		out := make([]number, 1)
		concat := func(inout, in []number) {
			for i := range inout {
				inout[i] = number{inout[i].Value*in[i].Scale + in[i].Value, inout[i].Scale * in[i].Scale}
			}
		}
		if err := gobtl.AllreduceFunc(c, mine, out, concat); err != nil {
			return err
		}
		if c.Rank() == 3 {
			fmt.Println(out[0].Value)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: 1234
}

// Gather to one rank, then Scatter back.
func ExampleComm_Gather() {
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(c *gobtl.Comm) error {
		all := make([]byte, 2*c.Size())
		if err := c.Gather([]byte{byte('a' + c.Rank()), '.'}, all, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(string(all))
			slices.Reverse(all)
		}
		mine := make([]byte, 2)
		if err := c.Scatter(all, mine, 0); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Println(string(mine))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// a.b.c.
	// .a
}

// A broadcast of structs: the typed collectives move any element type
// that holds no pointer.
func ExampleBcast() {
	type body struct {
		X, Y, Mass float64
		ID         int32
	}
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(c *gobtl.Comm) error {
		bodies := make([]body, 2)
		if c.Rank() == 0 {
			bodies[0], bodies[1] = body{0, 0, 5.9e24, 3}, body{3.8e8, 0, 7.3e22, 301}
		}
		if err := gobtl.Bcast(c, bodies, 0); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Println(bodies[1].ID, bodies[1].Mass)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: 301 7.3e+22
}

// A collective whose context ends does not stop half-way — the other ranks
// are in it — but returns a *PendingError whose request completes when it
// is done with the buffers.
func ExamplePendingError() {
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{}, func(c *gobtl.Comm) error {
		x, sum := []int{c.Rank() + 1}, make([]int, 1)
		if c.Rank() == 1 {
			// Rank 1 comes late: once rank 0 has given up waiting.
			if _, err := c.Recv(make([]byte, 1), 0, 0); err != nil {
				return err
			}
			return gobtl.Allreduce(c, x, sum, gobtl.Sum)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := gobtl.AllreduceContext(ctx, c, x, sum, gobtl.Sum)
		var p *gobtl.PendingError
		if !errors.As(err, &p) {
			return err
		}
		fmt.Println("rank 0 gave up waiting:", p.Err)
		if err := c.Send([]byte{1}, 1, 0); err != nil {
			return err
		}
		if _, err := c.Wait(p.Request); err != nil {
			return err
		}
		fmt.Println("sum", sum[0]) // x and sum are rank 0's again
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// rank 0 gave up waiting: context canceled
	// sum 3
}
