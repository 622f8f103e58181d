// Command rank is the rank program of the engine tests (test/engines):
// started by mpirun, srun or mpiexec.hydra, it joins the job with
// gobtl.Init, says how long that took, and — when asked — fails on
// purpose, so that a test sees how the engine ends the job.
//
// Every rank prints one line to standard output after Init:
//
//	init rank=R size=N host=H launch_ns=L init_ns=I
//
// where init_ns is the gobtl.Init call and launch_ns the time from
// $GOBTL_TEST_T0 (Unix nanoseconds, set by the test just before it starts
// the engine) until Init returned.
//
// With -fail R, rank R fails after a barrier that every rank passes: it
// exits with -exit's status without closing the communicator, or with
// -abort calls Comm.Abort and then waits forever, as MPI_Abort never
// returns. Every other rank then waits in a second barrier that cannot
// complete: only the engine ending the job ends them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gobtl/gobtl"
)

func main() {
	fail := flag.Int("fail", -1, "the rank that fails after the first barrier (-1: none)")
	exit := flag.Int("exit", 3, "the failing rank's exit status")
	abort := flag.Bool("abort", false, "the failing rank calls Comm.Abort instead of exiting")
	flag.Parse()

	start := time.Now()
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank: init:", err)
		os.Exit(1)
	}
	done := time.Now()
	var launch time.Duration
	if t0, err := strconv.ParseInt(os.Getenv("GOBTL_TEST_T0"), 10, 64); err == nil {
		launch = done.Sub(time.Unix(0, t0))
	}
	host, _ := os.Hostname()
	fmt.Printf("init rank=%d size=%d host=%s launch_ns=%d init_ns=%d\n", c.Rank(), c.Size(), host, launch.Nanoseconds(), done.Sub(start).Nanoseconds())

	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "rank: barrier:", err)
		os.Exit(1)
	}
	if c.Rank() == *fail {
		// The test measures from here to the engine's exit.
		fmt.Fprintf(os.Stderr, "rank %d: failing at %d\n", c.Rank(), time.Now().UnixNano())
		if *abort {
			c.Abort(errors.New("the test asked rank to abort"))
			for {
				time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock and exit
			}
		}
		os.Exit(*exit)
	}
	if *fail >= 0 {
		err := c.Barrier()
		fmt.Fprintf(os.Stderr, "rank %d: the barrier after rank %d failed returned: %v\n", c.Rank(), *fail, err)
		os.Exit(1)
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "rank: close:", err)
		os.Exit(1)
	}
}
