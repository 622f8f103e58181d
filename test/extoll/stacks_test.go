// Package extoll_test runs the EXTOLL example stacks end to end through
// gobtl.Init: the HCL files decode against the component's schema, the
// policies are picked from the policy block, and ranks exchange messages
// over the software device.
package extoll_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/btl/extoll/velo"
)

func examples(t *testing.T) []string {
	_, here, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(here), "../../conf/examples/extoll-*.hcl"))
	if err != nil || len(files) < 2 {
		t.Fatalf("example stacks: %v %v", files, err)
	}
	return files
}

// Each example stack carries a ring of messages of every size class
// around 4 ranks, and the flow control it names is the one that runs.
func TestExampleStacksRunARing(t *testing.T) {
	for _, file := range examples(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "extoll-"), ".hcl")
			err := gobtl.RunLocal(context.Background(), 4, gobtl.Options{ConfigFiles: []string{file}}, func(c *gobtl.Comm) error {
				n, me := c.Size(), c.Rank()
				for _, size := range []int{0, 30, 2048, 5000, 300000} {
					msg := bytes.Repeat([]byte{byte(me)}, size)
					buf := make([]byte, size)
					r, err := c.Irecv(buf, (me+n-1)%n, size)
					if err != nil {
						return err
					}
					if err := c.Send(msg, (me+1)%n, size); err != nil {
						return err
					}
					if _, err := c.Wait(r); err != nil {
						return err
					}
					if !bytes.Equal(buf, bytes.Repeat([]byte{byte((me + n - 1) % n)}, size)) {
						return fmt.Errorf("rank %d: %d-byte message corrupt", me, size)
					}
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				snap := c.Metrics().Snapshot()
				if snap["extoll.extoll0.frames_out"].(int64) == 0 {
					return fmt.Errorf("rank %d: nothing went over extoll", me)
				}
				scheme := snap["extoll.extoll0.fc.scheme"].(map[string]int64)["value"]
				if w := map[string]int64{"static": velo.SchemeStatic, "dynamic": velo.SchemeDynamic}[want]; scheme != w {
					return fmt.Errorf("rank %d: flow-control scheme %d runs, the stack names %s", me, scheme, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
