package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Gather collects every rank's mine at rank 0, in rank order; the other
// ranks get nil. Each value travels as JSON after its length (on tag and
// tag+1), and rank 0's own goes through JSON too, so that every entry
// decodes alike: numbers in maps, such as a Metrics snapshot's counters,
// come back as json.Number.
func Gather[T any](c Comm, mine T, tag int) ([]T, error) {
	blob, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	var n [8]byte
	if c.Rank() != 0 {
		binary.LittleEndian.PutUint64(n[:], uint64(len(blob)))
		if err := c.Send(n[:], 0, tag); err != nil {
			return nil, err
		}
		return nil, c.Send(blob, 0, tag+1)
	}
	all := make([]T, c.Size())
	for r := range c.Size() {
		if r > 0 {
			if _, err := c.Recv(n[:], r, tag); err != nil {
				return nil, err
			}
			blob = make([]byte, binary.LittleEndian.Uint64(n[:]))
			if _, err := c.Recv(blob, r, tag+1); err != nil {
				return nil, err
			}
		}
		dec := json.NewDecoder(bytes.NewReader(blob))
		dec.UseNumber()
		if err := dec.Decode(&all[r]); err != nil {
			return nil, fmt.Errorf("rank %d's result: %w", r, err)
		}
	}
	return all, nil
}
