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

// The two-host test over libfabric: 4 ranks, 2 per host, under mpirun,
// with a stack of btl "sm" within a host and btl "ofi" (provider tcp,
// if_include the link's subnet, so each host opens its own end of the
// veth pair and no other address) between the hosts; every message of
// every size from 0 B to 8 MiB between every pair is checked. The
// counters prove the split: ofi's per-peer counters show nothing to the
// rank on the same host and, for every pair across the hosts, at least
// every byte the sender owed the receiver — sent in frames or written by
// the sender, or read by the receiver; shared memory carried the
// neighbour's traffic.
func TestFourRanksOnTwoHostsUseSharedMemoryWithinAndOFIAcross(t *testing.T) {
	if !bins.ofi {
		t.Skip("engines: the programs were built without libfabric (libfabric-dev is not installed: make ofi-dev), so they have no btl ofi")
	}
	h := newTwoHosts(t)
	stack := filepath.Join(t.TempDir(), "ofi.hcl")
	hcl := fmt.Sprintf("btl \"sm\" \"local\" {}\nbtl \"ofi\" \"net\" {\n  provider   = \"tcp\"\n  if_include = [%q]\n}\n", h.subnet)
	if err := os.WriteFile(stack, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	const iters = 2
	r := h.run(t, 2, 2, []string{"GOBTL_CONFIG=" + stack}, bin("gobtl"), "bench", "pairs", "--sizes", "0:8MiB", "--iters", fmt.Sprint(iters), "--json")
	if r.status != 0 {
		t.Fatalf("pairs across two hosts over ofi failed:\n%s", r)
	}
	rep := decodePairs(t, r, []string{h.a.name, h.a.name, h.b.name, h.b.name})
	// ofi.net.<domain>.<counter>.peer<r>: the domain is each host's end of
	// the link, named after the host.
	peerCounter := func(rank, peer int, name string) int64 {
		re := regexp.MustCompile(fmt.Sprintf(`^ofi\.net\.%s\.%s\.peer%d$`, regexp.QuoteMeta(rep.RankHosts[rank]), name, peer))
		return sum(rep.RankCounters[rank], re)
	}
	perPeer := int64(iters * (16<<20 - 1)) // iters messages of every size 1 B .. 8 MiB
	smSends := regexp.MustCompile(`^sm\..*\.(fastbox|fifo)_sends$`)
	ofiAny, ibAny := regexp.MustCompile(`^ofi\.`), regexp.MustCompile(`^ib\.`)
	for rank, cs := range rep.RankCounters {
		if n := sum(cs, smSends); n == 0 {
			t.Errorf("rank %d sent nothing through shared memory to its neighbour on %s", rank, rep.RankHosts[rank])
		}
		if n, ib := sum(cs, ofiAny), sum(cs, ibAny); n == 0 || ib != 0 {
			t.Errorf("rank %d: ofi's counters sum to %d, ib's to %d", rank, n, ib)
		}
		for peer := range 4 {
			if peer == rank {
				continue
			}
			frames, bytes := peerCounter(rank, peer, "frames_sent"), peerCounter(rank, peer, "bytes_sent")
			written, read := peerCounter(rank, peer, "rdma_written"), peerCounter(rank, peer, "rdma_read")
			t.Logf("rank %d on %s to rank %d: ofi frames %d, bytes %d, rdma written %d, read %d", rank, rep.RankHosts[rank], peer, frames, bytes, written, read)
			if rep.RankHosts[peer] == rep.RankHosts[rank] {
				if frames+bytes+written+read != 0 {
					t.Errorf("rank %d moved ofi traffic with rank %d on its own host", rank, peer)
				}
				continue
			}
			// Every byte rank owed peer crossed the fabric: in frames, by
			// rank's writes or by peer's reads.
			if moved := bytes + written + peerCounter(peer, rank, "rdma_read"); frames == 0 || moved < perPeer {
				t.Errorf("rank %d's %d bytes to rank %d on the other host: %d frames and %d bytes over ofi", rank, perPeer, peer, frames, moved)
			}
		}
	}
	if t.Failed() {
		t.Logf("pairs:\n%s", r)
	}
}

// decodePairs reads `gobtl bench pairs --json` of a 4-rank job and checks
// that rank i ran on hosts[i].
func decodePairs(t *testing.T, r result, hosts []string) pairsReport {
	t.Helper()
	var rep pairsReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("pairs' report: %v\n%s", err, r)
	}
	if rep.Ranks != len(hosts) || len(rep.RankCounters) != len(hosts) || len(rep.RankHosts) != len(hosts) || len(rep.Rows) != 25 {
		t.Fatalf("pairs reported %d ranks, %d counter sets, %d hosts, %d sizes; want %d, %[5]d, %[5]d, 25:\n%s",
			rep.Ranks, len(rep.RankCounters), len(rep.RankHosts), len(rep.Rows), len(hosts), r)
	}
	for rank, got := range rep.RankHosts {
		if got != hosts[rank] {
			t.Fatalf("rank %d ran on %q, want %q (--map-by slot): hosts %v", rank, got, hosts[rank], rep.RankHosts)
		}
	}
	return rep
}
