package boot

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Operations of the wire protocol.
const (
	// OpHello opens a session: Rank and Job identify the rank; the reply
	// carries Size.
	OpHello = "hello"
	// OpFence carries the rank's Puts since its last fence; the reply comes
	// when every rank has fenced and carries every rank's Puts of this round.
	OpFence = "fence"
	// OpAbort reports a fatal error of the rank (Msg) to the launcher, which
	// stops the job and prints it. There is no reply.
	OpAbort = "abort"
	// OpFinalize says the rank ends cleanly (its communicator's Close,
	// MPI_Finalize): a rank that said hello and exits without it — even
	// with status 0 — failed, and the launcher stops the job. The reply
	// comes once the launcher has recorded it, before the rank exits.
	OpFinalize = "finalize"
	// OpLost is the launcher's notice, unasked, that the rank Reply.Rank
	// ended without finalizing (Reply.Err says how): the ranks fail their
	// operations on it at once (PMIx's PMIX_ERR_PROC_TERM_WO_SYNC event)
	// instead of waiting for their transports to notice, or for ever on a
	// peer they never connected to.
	OpLost = "lost"
)

// Request is one line a rank sends to the server.
type Request struct {
	Op   string            `json:"op"`
	Rank int               `json:"rank"`
	Job  string            `json:"job,omitempty"`
	Puts map[string][]byte `json:"puts,omitempty"`
	Msg  string            `json:"msg,omitempty"`
}

// Reply is one line the server sends to a rank.
type Reply struct {
	Op   string `json:"op"`
	Size int    `json:"size,omitempty"`
	// KV holds, per rank, what it put in this fence round.
	KV map[int]map[string][]byte `json:"kv,omitempty"`
	// Err, when set, says why the request failed (a rank died, a bad
	// hello); the session is over. In an OpLost notice it says how the
	// rank ended.
	Err string `json:"err,omitempty"`
	// Rank is the rank an OpLost notice is about.
	Rank int `json:"rank,omitempty"`
}

// MaxLine bounds one request line the server reads, newline included. A
// request carries one rank's puts of one fence round: a few address blobs
// of a few hundred bytes each (sm, ib, extoll, the host name), so a
// mebibyte leaves three orders of magnitude to spare while a process that
// can reach the socket cannot make the launcher buffer more. Replies,
// which carry every rank's puts, are not bounded by it.
const MaxLine = 1 << 20

// ErrLineTooLong is returned by ReadLine for a line longer than its limit.
var ErrLineTooLong = errors.New("boot: protocol line too long")

// ReadLine returns the next line of r without its newline, reading at most
// max bytes: a longer line is ErrLineTooLong, and the reader is then left
// in the middle of it (the caller ends the session). A final line without
// a newline is io.ErrUnexpectedEOF.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, max)
		}
		switch {
		case err == nil:
			if line == nil {
				return chunk[:len(chunk)-1], nil // valid until the next read
			}
			return append(line, chunk[:len(chunk)-1]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		case errors.Is(err, io.EOF) && len(line)+len(chunk) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// DecodeRequest parses one request line and checks what every operation
// needs: a known Op and, for hello, a job id.
func DecodeRequest(line []byte) (Request, error) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Request{}, fmt.Errorf("boot: bad request: %w", err)
	}
	switch req.Op {
	case OpHello:
		if req.Job == "" {
			return Request{}, errors.New("boot: hello without a job id")
		}
	case OpFence, OpAbort, OpFinalize:
	default:
		return Request{}, fmt.Errorf("boot: unknown operation %.40q", req.Op)
	}
	return req, nil
}
