package pmi

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// put is one key a rank published, in order.
type put struct {
	key   string
	value []byte
}

// encodeBlob packs what a rank put in one epoch: for each key, its
// length and bytes, then its value's (uvarints).
func encodeBlob(puts []put) []byte {
	var b []byte
	for _, p := range puts {
		b = binary.AppendUvarint(b, uint64(len(p.key)))
		b = append(b, p.key...)
		b = binary.AppendUvarint(b, uint64(len(p.value)))
		b = append(b, p.value...)
	}
	return b
}

// decodeBlob unpacks encodeBlob's output into into.
func decodeBlob(b []byte, into map[string][]byte) error {
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("blob: a length runs past the end: %w", errWire)
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, nil
	}
	for len(b) > 0 {
		k, err := next()
		if err != nil {
			return err
		}
		v, err := next()
		if err != nil {
			return err
		}
		into[string(k)] = append([]byte(nil), v...)
	}
	return nil
}

// blobKey names chunk c of rank's blob of epoch e in the job's key space:
// short, and in the alphabet every PMI server accepts.
func blobKey(rank, epoch, c int) string {
	if c == 0 {
		return fmt.Sprintf("gobtl-%d-%d", rank, epoch)
	}
	return fmt.Sprintf("gobtl-%d-%d-%d", rank, epoch, c)
}

// chunkBlob encodes blob for the wire (base64url, which has neither
// spaces, semicolons nor '=') and splits it into values of at most limit
// bytes; the first starts with the number of chunks and a dot.
func chunkBlob(blob []byte, limit int) []string {
	s := base64.RawURLEncoding.EncodeToString(blob)
	room := limit - 12 // the count and its dot
	n := max(1, (len(s)+room-1)/room)
	out := make([]string, n)
	for i := range out {
		piece := s[min(i*room, len(s)):min((i+1)*room, len(s))]
		if i == 0 {
			piece = strconv.Itoa(n) + "." + piece
		}
		out[i] = piece
	}
	return out
}

// chunkCount reads the first chunk: how many chunks there are, and its
// own piece of the encoding.
func chunkCount(head string) (int, string, error) {
	ns, piece, ok := strings.Cut(head, ".")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || n > 1<<20 {
		return 0, "", fmt.Errorf("blob head %.40q: %w", head, errWire)
	}
	return n, piece, nil
}

// joinChunks decodes the pieces of a blob.
func joinChunks(pieces []string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.Join(pieces, ""))
	if err != nil {
		return nil, fmt.Errorf("blob: %v: %w", err, errWire)
	}
	return b, nil
}
