package engines

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The namespaces are hosts as the engines see them: each its own
// hostname and address, each reaching the other over the link.
func TestTwoHostsHaveTheirOwnNamesAndAddresses(t *testing.T) {
	h := newTwoHosts(t)
	for _, x := range []host{h.a, h.b} {
		out, err := x.onHost("sh", "-c", "hostname; ip -4 -o addr show dev "+x.name)
		if err != nil {
			t.Fatalf("%s: %v\n%s", x.name, err, out)
		}
		if lines := strings.Fields(out); len(lines) == 0 || lines[0] != x.name || !strings.Contains(out, x.addr+"/24") {
			t.Errorf("host %s says:\n%s", x.name, out)
		}
	}
	if out, err := h.a.onHost("getent", "hosts", h.b.name); err != nil || !strings.Contains(out, h.b.addr) {
		t.Errorf("host a resolves %s as %q (%v)", h.b.name, out, err)
	}
}

// pairsReport is the part of `gobtl bench pairs --json` the test reads.
type pairsReport struct {
	Ranks        int
	Rows         []map[string]float64
	RankHosts    []string         `json:"rank_hosts"`
	RankCounters []map[string]any `json:"rank_counters"`
}

// sum adds the counters (numbers) or gauges (their value) whose names
// match re.
func sum(cs map[string]any, re *regexp.Regexp) int64 {
	var t int64
	for name, v := range cs {
		if !re.MatchString(name) {
			continue
		}
		switch v := v.(type) {
		case json.Number:
			n, _ := v.Int64()
			t += n
		case map[string]any:
			if n, ok := v["value"].(json.Number); ok {
				x, _ := n.Int64()
				t += x
			}
		}
	}
	return t
}

// The two-host test: 4 ranks, 2 per host, started by mpirun across the
// hosts, exchange checked messages of every size from 0 B to 8 MiB
// between every pair. Every rank's counters show shared memory carrying
// the traffic to the rank on its own host and softrc (ib over TCP) all of
// it to the ranks on the other.
func TestFourRanksOnTwoHostsUseSharedMemoryWithinAndSoftrcAcross(t *testing.T) {
	h := newTwoHosts(t)
	const iters = 2
	r := h.run(t, 2, 2, nil, bin("gobtl"), "bench", "pairs", "--sizes", "0:8MiB", "--iters", fmt.Sprint(iters), "--json")
	if r.status != 0 {
		t.Fatalf("pairs across two hosts failed:\n%s", r)
	}
	var rep pairsReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("pairs' report: %v\n%s", err, r)
	}
	if rep.Ranks != 4 || len(rep.RankCounters) != 4 || len(rep.RankHosts) != 4 || len(rep.Rows) != 25 {
		t.Fatalf("pairs reported %d ranks, %d counter sets, %d hosts, %d sizes; want 4, 4, 4, 25:\n%s", rep.Ranks, len(rep.RankCounters), len(rep.RankHosts), len(rep.Rows), r)
	}
	want := []string{h.a.name, h.a.name, h.b.name, h.b.name}
	for rank, got := range rep.RankHosts {
		if got != want[rank] {
			t.Fatalf("rank %d ran on %q, want %q (--map-by slot): hosts %v", rank, got, want[rank], rep.RankHosts)
		}
	}
	// What one rank sends one peer: iters messages of every size 1 B .. 8 MiB.
	perPeer := int64(iters * (16<<20 - 1))
	smSends := regexp.MustCompile(`^sm\..*\.(fastbox|fifo)_sends$`)
	wire := regexp.MustCompile(`^ib\..*\.wire_bytes_sent$`)
	for rank, cs := range rep.RankCounters {
		line := fmt.Sprintf("rank %d on %s: sm sends %d, softrc wire bytes %d, ib frames to peers", rank, rep.RankHosts[rank], sum(cs, smSends), sum(cs, wire))
		for peer := range 4 {
			line += fmt.Sprintf(" %d", sum(cs, regexp.MustCompile(fmt.Sprintf(`^ib\.[^.]+\.frames\.peer%d$`, peer))))
		}
		t.Log(line)
		if n := sum(cs, smSends); n == 0 {
			t.Errorf("rank %d sent nothing through shared memory to its neighbour on %s", rank, rep.RankHosts[rank])
		}
		for peer := range 4 {
			frames := sum(cs, regexp.MustCompile(fmt.Sprintf(`^ib\.[^.]+\.frames\.peer%d$`, peer)))
			switch {
			case peer == rank:
			case rep.RankHosts[peer] == rep.RankHosts[rank] && frames != 0:
				t.Errorf("rank %d sent %d ib frames to rank %d on its own host", rank, frames, peer)
			case rep.RankHosts[peer] != rep.RankHosts[rank] && frames == 0:
				t.Errorf("rank %d sent no ib frame to rank %d on the other host", rank, peer)
			}
		}
		// Every byte for the other host's two ranks left through softrc's
		// TCP (eager frames, or the data of a rendezvous, which the
		// sender's device puts or serves to the reader's get).
		if n := sum(cs, wire); n < 2*perPeer {
			t.Errorf("rank %d's softrc device sent %d bytes, less than the %d it owes the other host's ranks", rank, n, 2*perPeer)
		}
	}
	if t.Failed() {
		t.Logf("pairs:\n%s", r)
	}
}

// A stack file that chooses the network BTL's address by subnet (ib's
// if_include, as btl_tcp_if_include does) runs the ring across the two
// hosts: what a user whose nodes have several networks writes.
func TestTheRingRunsAcrossTwoHostsOnTheSubnetTheStackNames(t *testing.T) {
	h := newTwoHosts(t)
	stack := filepath.Join(t.TempDir(), "net.hcl")
	hcl := fmt.Sprintf("btl \"sm\" \"local\" {}\nbtl \"ib\" \"net\" {\n  if_include = %q\n}\n", h.subnet)
	if err := os.WriteFile(stack, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.run(t, 2, 2, []string{"GOBTL_CONFIG=" + stack}, bin("ring"))
	if r.status != 0 || !strings.Contains(r.stdout, "ring: 4 ranks") {
		t.Fatalf("the ring across two hosts on %s:\n%s", h.subnet, r)
	}
}
