package boot

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
	// hello); the session is over.
	Err string `json:"err,omitempty"`
}
