package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
)

func errorf(format string, args ...any) error { return fmt.Errorf("sim: "+format, args...) }

// TierLinks are the counters of the links of one tier: tier 1 links the
// root to its children, tier 2 those children to theirs, and so on.
// "Down" is what parents sent (Put, Delete, Progress: the downsync
// stream), "Up" what children sent (acks and reports).
type TierLinks struct {
	Tier         int    `json:"tier"`
	Links        int    `json:"links"`
	DownBytes    uint64 `json:"down_bytes"`
	DownMessages uint64 `json:"down_messages"`
	DownObjects  uint64 `json:"down_objects"`
	UpBytes      uint64 `json:"up_bytes"`
	UpMessages   uint64 `json:"up_messages"`
	// UpReports counts, of UpMessages, those of the upsync stream
	// (reports); the rest acknowledge the downsync stream.
	UpReports uint64 `json:"up_reports"`
	Resyncs   uint64 `json:"resyncs"`
	// PacketBytes counts QUIC packets both ways on the in-memory network
	// (handshakes, keep-alives, acks, retransmissions included); 0 when
	// unknown (--network=udp).
	PacketBytes uint64 `json:"packet_bytes"`
}

func (a TierLinks) sub(b TierLinks) TierLinks {
	return TierLinks{Tier: a.Tier, Links: a.Links,
		DownBytes: a.DownBytes - b.DownBytes, DownMessages: a.DownMessages - b.DownMessages, DownObjects: a.DownObjects - b.DownObjects,
		UpBytes: a.UpBytes - b.UpBytes, UpMessages: a.UpMessages - b.UpMessages, UpReports: a.UpReports - b.UpReports, Resyncs: a.Resyncs - b.Resyncs,
		PacketBytes: a.PacketBytes - b.PacketBytes}
}

// snapshot is the fleet's counters at one moment.
type snapshot struct {
	at         time.Time
	cpu        time.Duration // process user + system
	tiers      []TierLinks
	reconnects []uint64 // per tier, uplinks' reconnects
	rootRev    int64    // the root's store revision: its Raft log index
}

// snap reads every counter of the fleet.
func (f *fleet) snap() snapshot {
	s := snapshot{at: time.Now(), cpu: processCPU()}
	if r := f.currentRoot(); r != nil {
		s.rootRev = r.Store().Revision()
	}
	f.recordLinks()
	depth := len(f.fan) - 1
	s.tiers = make([]TierLinks, depth)
	s.reconnects = make([]uint64, depth)
	for i := range s.tiers {
		s.tiers[i].Tier = i + 1
	}
	f.linksMu.Lock()
	for _, pl := range f.lastLinks {
		t := &s.tiers[min(pl.depth, depth-1)]
		for _, c := range pl.children {
			t.Links++
			t.DownBytes += c.Down.BytesSent
			t.DownMessages += c.Down.MessagesSent
			t.DownObjects += c.Down.Objects
			t.Resyncs += c.Down.Resyncs
			t.UpBytes += c.Down.BytesReceived + c.Up.BytesReceived
			t.UpMessages += c.Down.MessagesReceived + c.Up.MessagesReceived
			t.UpReports += c.Up.MessagesReceived
		}
	}
	f.linksMu.Unlock()
	for _, r := range append(append([]*relay(nil), f.regions...), f.edges...) {
		r.mu.Lock()
		c, running, past, dial, depth := r.child, r.stop != nil, r.pastReconnects, r.dialAddr, r.depth
		r.mu.Unlock()
		i := min(depth, len(s.tiers)) - 1
		n := past
		if c != nil && running {
			n += c.Uplink().Reconnects()
		}
		s.reconnects[i] += n
		if f.mn != nil && dial != "" && c != nil {
			to := f.rootLinkAddrs()
			if r.parent != nil {
				to = nil
				if pc := r.parent.current(); pc != nil {
					to = []string{pc.LinkAddr()}
				}
			}
			for _, to := range to {
				if to != "" {
					s.tiers[i].PacketBytes += f.mn.Stats(to, dial).Bytes + f.mn.Stats(dial, to).Bytes
				}
			}
		}
	}
	return s
}

// rootBytes is what the root sent its children (downsync stream).
func (s snapshot) rootBytes() uint64 {
	if len(s.tiers) == 0 {
		return 0
	}
	return s.tiers[0].DownBytes
}

func diffTiers(a, b snapshot) []TierLinks {
	out := make([]TierLinks, len(b.tiers))
	for i := range b.tiers {
		out[i] = b.tiers[i].sub(a.tiers[i])
	}
	return out
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Memory is the process's memory at one moment.
type Memory struct {
	HeapLiveMiB  float64 `json:"heap_live_mib"`  // after the last GC
	TotalMiB     float64 `json:"go_total_mib"`   // all memory the Go runtime maps
	RSSMiB       float64 `json:"rss_mib"`        // VmRSS
	PeakRSSMiB   float64 `json:"peak_rss_mib"`   // VmHWM
	StacksMiB    float64 `json:"stacks_mib"`     // goroutine stacks
	Goroutines   int     `json:"goroutines"`     // now
	HeapObjectsM float64 `json:"heap_objects_m"` // live heap objects, millions
}

const mib = 1 << 20

// readMemory collects garbage first (gc) when asked, so that heap figures
// are of what is live.
func readMemory(gc bool) Memory {
	if gc {
		runtime.GC()
	}
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/objects:objects"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(samples)
	m := Memory{Goroutines: runtime.NumGoroutine()}
	if samples[0].Value.Kind() == metrics.KindUint64 {
		m.HeapLiveMiB = float64(samples[0].Value.Uint64()) / mib
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		m.TotalMiB = float64(samples[1].Value.Uint64()) / mib
	}
	if samples[2].Value.Kind() == metrics.KindUint64 {
		m.HeapObjectsM = float64(samples[2].Value.Uint64()) / 1e6
	}
	if samples[3].Value.Kind() == metrics.KindUint64 {
		m.StacksMiB = float64(samples[3].Value.Uint64()) / mib
	}
	m.RSSMiB, m.PeakRSSMiB = procStatus("VmRSS:"), procStatus("VmHWM:")
	return m
}

// procStatus reads a "kB" field of /proc/self/status, in MiB.
func procStatus(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// cpuProfile profiles the whole process while a phase runs, to split its
// CPU time by tier: every relay's goroutines carry the pprof label
// tierLabel (see fleet.go). Only one profile runs per process: when
// another is running (go test -cpuprofile), the split is unknown.
type cpuProfile struct {
	buf bytes.Buffer
	on  bool
}

func startProfile() *cpuProfile {
	p := &cpuProfile{}
	p.on = pprof.StartCPUProfile(&p.buf) == nil
	return p
}

// stop ends the profile and returns CPU time by tier ("other": GC,
// runtime, timers and the simulator itself); nil when it did not run or
// was stopped already.
func (p *cpuProfile) stop() (map[string]time.Duration, []byte) {
	if !p.on {
		return nil, nil
	}
	p.on = false
	pprof.StopCPUProfile()
	by, err := cpuByLabel(p.buf.Bytes(), tierLabel, vcluster.ProfileLabel)
	if err != nil {
		return nil, nil
	}
	return by, p.buf.Bytes()
}

// cpuByLabel sums the CPU time of a gzipped pprof profile by the value of
// label ("other" without it), and within one value by the value of part
// when a sample has it too ("edge: virtual-cluster"). It decodes only
// what it needs of profile.proto: the sample types, the samples' values
// and labels, and the string table.
func cpuByLabel(gz []byte, label, part string) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str
	}
	var (
		samples     []sample
		strs        []string
		sampleTypes [][2]int64 // type, unit
	)
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // sample_type
			vt, err := varintPair(v)
			if err != nil {
				return err
			}
			sampleTypes = append(sampleTypes, vt)
		case 2: // sample
			var s sample
			if err := eachField(v, func(n protowire.Number, t protowire.Type, b []byte, x uint64) error {
				switch {
				case n == 2 && t == protowire.BytesType: // packed values
					for len(b) > 0 {
						y, m := protowire.ConsumeVarint(b)
						if m < 0 {
							return protowire.ParseError(m)
						}
						s.values = append(s.values, int64(y))
						b = b[m:]
					}
				case n == 2:
					s.values = append(s.values, int64(x))
				case n == 3: // label
					l, err := varintPair(b)
					if err != nil {
						return err
					}
					s.labels = append(s.labels, l)
				}
				return nil
			}); err != nil {
				return err
			}
			samples = append(samples, s)
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return ""
	}
	col := -1
	for i, st := range sampleTypes {
		if str(st[0]) == "cpu" && str(st[1]) == "nanoseconds" {
			col = i
		}
	}
	if col < 0 {
		return nil, errorf("profile has no cpu/nanoseconds values")
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if col >= len(s.values) {
			continue
		}
		tier, in := "other", ""
		for _, l := range s.labels {
			switch str(l[0]) {
			case label:
				tier = str(l[1])
			case part:
				in = str(l[1])
			}
		}
		if in != "" {
			tier += ": " + in
		}
		out[tier] += time.Duration(s.values[col])
	}
	return out, nil
}

// varintPair decodes the varint fields 1 and 2 of a message (a sample
// type's type and unit, a label's key and str).
func varintPair(b []byte) ([2]int64, error) {
	var p [2]int64
	err := eachField(b, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
		if n == 1 || n == 2 {
			p[n-1] = int64(x)
		}
		return nil
	})
	return p, err
}

// eachField calls fn for each field of a protobuf message: v holds a
// length-delimited field's bytes, x a varint's value.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// heapProfile returns the heap profile (gzipped pprof) as of the last
// collection, nil if it cannot be written.
func heapProfile() []byte {
	var b bytes.Buffer
	if pprof.Lookup("heap").WriteTo(&b, 0) != nil {
		return nil
	}
	return b.Bytes()
}
