package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Wire limits: a response longer than these is a broken or hostile
// server, not a reason to allocate without bound.
const (
	maxLine = 64 << 10 // a PMI-1 line
	maxBody = 1 << 20  // a PMI-2 command
	lenSize = 6        // the PMI-2 length prefix, "%6d" or "%-6d"
)

// errWire reports a message that is not PMI.
var errWire = errors.New("malformed PMI message")

// msg is one command or response: its name and its attributes in order
// (PMI allows repeated keys).
type msg struct {
	cmd  string
	args []arg
}

type arg struct{ key, val string }

// get returns the value of the first attribute named key.
func (m *msg) get(key string) (string, bool) {
	for _, a := range m.args {
		if a.key == key {
			return a.val, true
		}
	}
	return "", false
}

// int returns the attribute key as an integer.
func (m *msg) int(key string) (int, error) {
	v, ok := m.get(key)
	if !ok {
		return 0, fmt.Errorf("%s has no %s", m.cmd, key)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s: %s=%q is not an integer", m.cmd, key, v)
	}
	return n, nil
}

// rc is the response's return code: 0 when absent, as the servers omit
// it on success in some responses.
func (m *msg) rc() (int, string) {
	v, ok := m.get("rc")
	if !ok {
		return 0, ""
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		n = -1
	}
	if n == 0 {
		return 0, ""
	}
	for _, k := range []string{"errmsg", "msg"} {
		if s, ok := m.get(k); ok {
			return n, s
		}
	}
	return n, "no message"
}

func (m msg) String() string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(m.cmd)
	for _, a := range m.args {
		b.WriteByte(' ')
		b.WriteString(a.key)
		b.WriteByte('=')
		b.WriteString(a.val)
	}
	return b.String()
}

// validKey accepts what both wires and every server take as a key.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/' || c == '.') {
			return false
		}
	}
	return true
}

// validValue reports whether v survives the wire of version ver: PMI-1
// splits on spaces and ends at a newline, PMI-2 splits on semicolons.
func validValue(v string, ver int) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\n' || c == '\r' || c == 0:
			return false
		case ver == 1 && (c == ' ' || c == '\t'):
			return false
		case ver == 2 && c == ';':
			return false
		}
	}
	return true
}

// appendMsg encodes m in the wire of version ver: PMI-1's
// "cmd=x k=v\n" or PMI-2's length-prefixed "cmd=x;k=v;".
func appendMsg(b []byte, m msg, ver int) ([]byte, error) {
	if !validKey(m.cmd) {
		return b, fmt.Errorf("command %q: %w", m.cmd, errWire)
	}
	for _, a := range m.args {
		if !validKey(a.key) || !validValue(a.val, ver) {
			return b, fmt.Errorf("%s: attribute %q=%q cannot be sent over PMI-%d: %w", m.cmd, a.key, a.val, ver, errWire)
		}
	}
	if ver == 1 {
		b = append(b, "cmd="...)
		b = append(b, m.cmd...)
		for _, a := range m.args {
			b = append(b, ' ')
			b = append(b, a.key...)
			b = append(b, '=')
			b = append(b, a.val...)
		}
		return append(b, '\n'), nil
	}
	start := len(b)
	b = append(b, "      cmd="...)
	b = append(b, m.cmd...)
	b = append(b, ';')
	for _, a := range m.args {
		b = append(b, a.key...)
		b = append(b, '=')
		b = append(b, a.val...)
		b = append(b, ';')
	}
	n := len(b) - start - lenSize
	if n > maxBody {
		return b[:start], fmt.Errorf("%s: %d bytes exceed a PMI-2 command: %w", m.cmd, n, errWire)
	}
	copy(b[start:start+lenSize], fmt.Sprintf("%-6d", n))
	return b, nil
}

// parseMsg decodes one message body of version ver (a PMI-1 line without
// its newline, or a PMI-2 body without its length).
func parseMsg(s string, ver int) (msg, error) {
	sep := byte(' ')
	if ver == 2 {
		sep = ';'
	}
	var m msg
	first := true
	for len(s) > 0 {
		i := strings.IndexByte(s, sep)
		tok := s
		if i >= 0 {
			tok, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if ver == 1 {
			tok = strings.TrimRight(tok, "\r\t")
		}
		if tok == "" {
			continue
		}
		key, val, _ := strings.Cut(tok, "=")
		if !validKey(key) || !validValue(val, ver) {
			return msg{}, fmt.Errorf("token %q: %w", tok, errWire)
		}
		if first {
			if key != "cmd" || !validKey(val) {
				return msg{}, fmt.Errorf("%q does not start with cmd=: %w", tok, errWire)
			}
			m.cmd, first = val, false
			continue
		}
		m.args = append(m.args, arg{key, val})
	}
	if first {
		return msg{}, fmt.Errorf("empty message: %w", errWire)
	}
	return m, nil
}

// readMsg reads one message of version ver from r.
func readMsg(r *bufio.Reader, ver int) (msg, error) {
	if ver == 1 {
		var line []byte
		for {
			part, more, err := r.ReadLine()
			if err != nil {
				return msg{}, err
			}
			line = append(line, part...)
			if len(line) > maxLine {
				return msg{}, fmt.Errorf("a line of more than %d bytes: %w", maxLine, errWire)
			}
			if !more {
				break
			}
		}
		return parseMsg(string(line), 1)
	}
	var hdr [lenSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return msg{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n <= 0 || n > maxBody {
		return msg{}, fmt.Errorf("length prefix %q: %w", hdr[:], errWire)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return msg{}, err
	}
	return parseMsg(string(body), 2)
}
