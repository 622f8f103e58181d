package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
)

// Name is the component name: the first label of its HCL block,
// btl "template" "<instance>" { ... }.
const Name = "template"

// Params is the schema of the block. The shared parameters come from core
// so that they mean the same in every BTL; WithRange narrows one to what
// this transport can do (a datagram must fit the socket's send buffer).
var Params = []core.Param{
	core.BTLParam("eager_limit", "4KiB"),
	core.BTLParam("max_send_size", "64KiB").WithRange("1KiB", "128KiB"),
	core.BTLParam("bandwidth", "2GB/s"),
	core.BTLParam("latency", "5us"),
	core.BTLParam("exclusivity", "10"),
	{Name: "dir", Type: core.ParamString, Default: "",
		Doc: "directory in which each rank makes the private directory of its socket; empty: the system's temporary directory"},
	{Name: "batch", Type: core.ParamInt, Default: "64", Min: "1", Max: "4096",
		Doc: "most frames one Progress call takes from one peer, so that a busy sender cannot starve the others"},
}

// Registration happens once, at init; a duplicate name panics, which is a
// build error, not a run-time surprise.
func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: Name, Params: Params, OpenBTL: Open, Reach: core.ReachHost,
		Doc: "The skeleton BTL to copy: frames between the ranks of one host over Unix seqpacket sockets, no RDMA.",
	})
}

// Open creates this rank's listening socket and publishes its path; peers
// connect to it on first use, after the job's fence. It returns one
// module (a transport with several ports would return one per port).
func Open(env core.BTLEnv) ([]core.Module, error) {
	attrs, err := core.BTLAttrs(env.Params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	b := env.Boot
	attrs.Component = Name
	attrs.Name = Name
	if env.Instance != "" {
		attrs.Name += ":" + env.Instance
	}
	attrs.RndvEagerLimit = 0 // a rendezvous start carries no data inline

	// The socket lives in a directory only this user can enter, named
	// after the job so that leftovers say whose they are.
	dir, err := os.MkdirTemp(env.Params.String("dir"), core.ShmPrefix(b.JobID())+Name+"-")
	if err != nil {
		return nil, fmt.Errorf("%s: socket directory: %w", Name, err)
	}
	path := filepath.Join(dir, "rank")
	fd, err := listen(path, b.Size())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: listen on %s: %w", Name, path, err)
	}
	m := newModule(env, attrs, fd, dir)
	if err := b.Put(m.key, []byte(path)); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: publish address: %w", Name, err)
	}
	return []core.Module{m}, nil
}

// listen binds a non-blocking seqpacket socket at path. The backlog holds
// a connection from every rank, so a peer's connect never waits for this
// rank to accept.
func listen(path string, ranks int) (int, error) {
	return seqpacket(path, func(fd int, sa unix.Sockaddr) error {
		if err := unix.Bind(fd, sa); err != nil {
			return err
		}
		return unix.Listen(fd, ranks)
	})
}

// dial connects a non-blocking seqpacket socket to path.
func dial(path string) (int, error) { return seqpacket(path, unix.Connect) }

// seqpacket makes a non-blocking seqpacket socket and applies use to it
// and path's address, closing it if that fails.
func seqpacket(path string, use func(fd int, sa unix.Sockaddr) error) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := use(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// gone reports errors that mean the peer's socket is closed.
func gone(err error) bool {
	return errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) ||
		errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT)
}
