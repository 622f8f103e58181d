package sm

import "github.com/gobtl/gobtl/core"

// stats are plain counters on the data path, published to the job's
// Metrics from housekeeping and Close so that no frame pays for an atomic
// add.
type stats struct {
	fboxSends, fboxRecvs, fboxFull    uint64
	fragSends, fifoRecvs, noResources uint64
	cmaGets, cmaPuts, cmaBytes        uint64
	cmaHelpBytes                      uint64 // written for a peer's cma read (coop.go)
	badFrames, peersLost              uint64
	copyStreamed, copySwitches        uint64 // copy_in = "auto": fragments streamed, changes of mode (copyin.go)
	published                         [14]uint64
	counters                          [14]*core.Counter
}

var statNames = [14]string{
	"fastbox_sends", "fastbox_recvs", "fastbox_full",
	"fifo_sends", "fifo_recvs", "no_resources",
	"cma_gets", "cma_puts", "cma_bytes", "cma_help_bytes",
	"bad_frames", "peers_lost", "copy_in_streamed", "copy_in_switches",
}

func (s *stats) init(m *core.Metrics, instance string) {
	if m == nil {
		return
	}
	for i, n := range statNames {
		s.counters[i] = m.Counter(core.MetricName("sm", instance, n))
	}
}

func (s *stats) values() [14]uint64 {
	return [14]uint64{s.fboxSends, s.fboxRecvs, s.fboxFull, s.fragSends, s.fifoRecvs, s.noResources,
		s.cmaGets, s.cmaPuts, s.cmaBytes, s.cmaHelpBytes, s.badFrames, s.peersLost, s.copyStreamed, s.copySwitches}
}

// flush adds what changed since the last flush to the metrics.
func (s *stats) flush() {
	if s.counters[0] == nil {
		return
	}
	v := s.values()
	for i := range v {
		if d := v[i] - s.published[i]; d != 0 {
			s.counters[i].Add(int64(d))
			s.published[i] = v[i]
		}
	}
}
