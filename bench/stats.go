package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// lap marks the start of iteration i of a timed loop, and with i ==
// warmup+iters its end: each timed iteration's duration goes to b.laps,
// at one clock read per iteration. It returns the timed part so far (all
// of it at the end).
func (b *runner) lap(i int) time.Duration {
	if i < b.warmup {
		return 0
	}
	now := time.Now()
	if i == b.warmup {
		b.t0, b.laps = now, b.laps[:0]
	} else {
		b.laps = append(b.laps, now.Sub(b.last))
	}
	b.last = now
	return now.Sub(b.t0)
}

// row is a row whose first field is main, followed by the minimum, median
// and maximum of f over this rank's timed iterations (main's name with
// _min, _median and _max) when f is given.
func (b *runner) row(main Field, f func(time.Duration) float64) Row {
	r := Row{Fields: []Field{main}}
	if f == nil || len(b.laps) == 0 {
		return r
	}
	vs := make([]float64, len(b.laps))
	for i, d := range b.laps {
		vs[i] = f(d)
	}
	return r.with(spread(main.Name, vs)...)
}

// with appends fields.
func (r Row) with(fs ...Field) Row {
	r.Fields = append(r.Fields, fs...)
	return r
}

// spread is the minimum, median and maximum of vs as the fields
// name_min, name_median, name_max.
func spread(name string, vs []float64) []Field {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return []Field{{name + "_min", s[0]}, {name + "_median", med}, {name + "_max", s[len(s)-1]}}
}

// Version is the gobtl build that runs: the module's version, or the VCS
// revision it was built from ("+dirty" when the tree had changes), as
// runtime/debug's build information has it.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v = fmt.Sprintf("%s %.12s%s", v, rev, dirty)
	}
	return strings.TrimSpace(v)
}

// NewReport starts the report of a run of bench on c: what ran, where
// (the host, gobtl's version) and when, with config echoed.
func NewReport(bench string, c Comm, config map[string]any) *Report {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	rep := &Report{Bench: bench, Ranks: c.Size(), Config: map[string]any{}, Rows: []Row{},
		Version: Version(), Host: host, Time: time.Now().UTC().Format(time.RFC3339)}
	for k, v := range config {
		rep.Config[k] = v
	}
	return rep
}

// The tags of GatherJSON: a length, then the JSON.
const (
	tagGatherLen  = 4
	tagGatherJSON = 5
)

// GatherJSON collects every rank's mine at rank 0, in rank order (nil
// elsewhere): a length, then the JSON. Rank 0's own goes through JSON
// too, so every entry decodes alike (numbers in an any as json.Number).
// Every rank of c must call it, after its part of the run is done.
func GatherJSON[T any](c Comm, mine T) ([]T, error) {
	blob, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	var n [8]byte
	if c.Rank() != 0 {
		binary.LittleEndian.PutUint64(n[:], uint64(len(blob)))
		if err := c.Send(n[:], 0, tagGatherLen); err != nil {
			return nil, err
		}
		return nil, c.Send(blob, 0, tagGatherJSON)
	}
	all := make([]T, c.Size())
	for r := range c.Size() {
		if r > 0 {
			if _, err := c.Recv(n[:], r, tagGatherLen); err != nil {
				return nil, err
			}
			blob = make([]byte, binary.LittleEndian.Uint64(n[:]))
			if _, err := c.Recv(blob, r, tagGatherJSON); err != nil {
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
