package gobtl

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/boot/pmix"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// reexported is every sentinel of this package by the name it has where
// it is declared.
var reexported = map[string]struct{ here, there error }{
	"core.ErrPeerLost":     {ErrPeerLost, core.ErrPeerLost},
	"core.ErrTruncated":    {ErrTruncated, core.ErrTruncated},
	"core.ErrNoResources":  {ErrNoResources, core.ErrNoResources},
	"core.ErrUnreachable":  {ErrUnreachable, core.ErrUnreachable},
	"core.ErrBadFrame":     {ErrBadFrame, core.ErrBadFrame},
	"core.ErrCanceled":     {ErrCanceled, core.ErrCanceled},
	"core.ErrClosed":       {ErrClosed, core.ErrClosed},
	"core.ErrNotSupported": {ErrNotSupported, core.ErrNotSupported},
	"core.ErrStalled":      {ErrStalled, core.ErrStalled},
	"core.ErrAborted":      {ErrAborted, core.ErrAborted},
	"coll.ErrMismatch":     {ErrMismatch, coll.ErrMismatch},
	"pml.ErrInvalid":       {ErrInvalid, pml.ErrInvalid},
	"pmix.ErrNotBuilt":     {ErrNotBuilt, pmix.ErrNotBuilt},
}

// notReexported are the sentinels of core, pml and coll a program never
// meets, and why.
var notReexported = map[string]string{
	"core.ErrNoJobKey": "Init always exchanges a job key before it opens a transport",
	"coll.ErrUnserved": "a node component's answer to coll, which then runs its own algorithms",
}

// TestEverySentinelOfCorePMLAndCollIsReexported reads the declarations of
// core, pml and coll: each of their Err… variables is re-exported here (or
// listed, with its reason, as one a program never meets), and errors.Is
// finds the re-export in an error that wraps the original.
func TestEverySentinelOfCorePMLAndCollIsReexported(t *testing.T) {
	for _, pkg := range []string{"core", "pml", "coll"} {
		for _, name := range sentinels(t, pkg) {
			q := pkg + "." + name
			if _, ok := reexported[q]; !ok && notReexported[q] == "" {
				t.Errorf("%s is not re-exported by package gobtl", q)
			}
		}
	}
	for q, e := range reexported {
		wrapped := fmt.Errorf("component: call: %w", e.there)
		if !errors.Is(wrapped, e.here) || !errors.Is(fmt.Errorf("outer: %w", wrapped), e.here) {
			t.Errorf("errors.Is does not find the re-export of %s in an error wrapping it", q)
		}
	}
}

// sentinels lists the exported Err… variables declared in the non-test
// files of a package directory.
func sentinels(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// check says what is wrong when err does not match want.
func check(what string, err, want error) error {
	if !errors.Is(err, want) {
		return fmt.Errorf("%s: %v, want %v", what, err, want)
	}
	return nil
}

// TestTheErrorsOfTheStackMatchTheReexports: errors the stack returns for
// each reason match this package's sentinels under errors.Is.
func TestTheErrorsOfTheStackMatchTheReexports(t *testing.T) {
	run(t, 2, Options{}, func(c *Comm) error {
		me := c.Rank()
		if err := check("send to rank 9", c.Send(nil, 9, 0), ErrInvalid); err != nil {
			return err
		}
		// Rank 0 sends 16 bytes into rank 1's 8, then a broadcast of 8
		// from rank 0 meets rank 1's 16.
		if me == 0 {
			if err := c.Send(make([]byte, 16), 1, 1); err != nil {
				return err
			}
		} else {
			_, err := c.Recv(make([]byte, 8), 0, 1)
			if err := check("a short receive", err, ErrTruncated); err != nil {
				return err
			}
		}
		err := c.Bcast(make([]byte, 8+8*me), 0)
		if me == 0 && err != nil {
			return err
		}
		if err := check("a broadcast of more bytes than the root's", err, ErrMismatch); me == 1 && err != nil {
			return err
		}
		r, err := c.Irecv(make([]byte, 8), 1-me, 99)
		if err != nil {
			return err
		}
		if err := c.Cancel(r); err != nil {
			return err
		}
		_, err = c.Wait(r)
		if err := check("a cancelled receive", err, ErrCanceled); err != nil {
			return err
		}
		s, err := c.Isend(make([]byte, 8), 1-me, 3)
		if err != nil {
			return err
		}
		if err := check("cancel of a send", c.Cancel(s), ErrNotSupported); err != nil {
			return err
		}
		if _, err := c.Recv(make([]byte, 8), 1-me, 3); err != nil {
			return err
		}
		if _, err := c.Wait(s); err != nil {
			return err
		}
		if err := c.Close(); err != nil {
			return err
		}
		return check("a send after Close", c.Send(nil, 1-me, 0), ErrClosed)
	})
}

// TestAStalledAndAnAbortedJobReturnTheReexports: in a job of one rank,
// where nothing else can move, a receive nothing matches stalls
// (ErrStalled, the stack's stall_timeout 50ms); after Abort every call
// returns ErrAborted.
func TestAStalledAndAnAbortedJobReturnTheReexports(t *testing.T) {
	stack := filepath.Join(t.TempDir(), "stall.hcl")
	if err := os.WriteFile(stack, []byte("job {\n  stall_timeout = \"50ms\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, 1, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
		r, err := c.Irecv(make([]byte, 8), 0, 99)
		if err != nil {
			return err
		}
		_, err = c.Wait(r)
		if err := check("a receive nothing matches", err, ErrStalled); err != nil {
			return err
		}
		if err := c.Cancel(r); err != nil {
			return err
		}
		if _, err := c.Wait(r); !errors.Is(err, ErrCanceled) {
			return fmt.Errorf("the stalled receive, cancelled: %v", err)
		}
		c.Abort(errors.New("given up"))
		_, err = c.Recv(make([]byte, 1), 0, 0)
		return check("a receive after Abort", err, ErrAborted)
	})
}
