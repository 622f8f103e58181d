package boot

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzFenceReply answers a rank's fence with any line, as a broken or
// hostile launcher might: the client either fails the fence (its session
// then broken for good) or takes a reply whose every rank is in range,
// and it never panics or waits past its context.
func FuzzFenceReply(f *testing.F) {
	f.Add([]byte(`{"op":"fence","kv":{"0":{"k":"dg=="},"1":{}}}`))
	f.Add([]byte(`{"op":"fence","kv":{"7":{"k":"dg=="}}}`))
	f.Add([]byte(`{"op":"fence","err":"rank 1 died"}`))
	f.Add([]byte(`{"op":"hello","size":2}`))
	f.Add([]byte(`{"op":"fence","kv":{"-1":null}}`))
	f.Add([]byte("\x00\xff{"))
	var seq atomic.Int64
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, line []byte) {
		path := filepath.Join(dir, fmt.Sprintf("s%d", seq.Add(1)))
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if _, err := r.ReadBytes('\n'); err != nil { // hello
				return
			}
			fmt.Fprintln(c, `{"op":"hello","size":2}`)
			if _, err := r.ReadBytes('\n'); err != nil { // fence
				return
			}
			c.Write(append(line, '\n'))
			c.(*net.UnixConn).CloseWrite()
			r.ReadBytes('\n') // until the client hangs up
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := Dial(ctx, path, 0, 2, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Put("k", []byte("v"))
		start := time.Now()
		err = c.Fence(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the fence waited %v, past its context", time.Since(start))
		}
		if err != nil {
			if c.Fence(ctx) == nil {
				t.Fatal("a failed session fenced again")
			}
			return
		}
		for r := range 2 {
			c.Get(ctx, r, "k")
		}
	})
}
