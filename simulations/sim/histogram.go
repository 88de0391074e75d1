package sim

import (
	"math"
	"time"
)

// histogram is a latency distribution in logarithmic buckets 1 % wide,
// from 1 µs to about an hour: constant memory whatever the number of
// samples (10 000 destinations × thousands of changes), percentiles
// within 1 %, and exact count, sum and maximum. Not safe for concurrent
// use.
type histogram struct {
	counts []uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

const (
	histGrowth  = 1.01
	histBuckets = 2200 // 1.01^2200 µs ≈ 1 h
)

var histLogBase = math.Log(histGrowth)

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	b := int(math.Log(us) / histLogBase)
	return min(b, histBuckets-1)
}

// bucketUpper is the upper bound of bucket b.
func bucketUpper(b int) time.Duration {
	return time.Duration(math.Pow(histGrowth, float64(b+1)) * float64(time.Microsecond))
}

func (h *histogram) add(d time.Duration) { h.addN(d, 1) }

// addN adds n samples of d, as n calls of add would.
func (h *histogram) addN(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	d = max(d, 0)
	h.counts[bucketOf(d)] += uint64(n)
	h.n += uint64(n)
	h.sum += d * time.Duration(n)
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0..1), at most the maximum.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketUpper(b), h.max)
		}
	}
	return h.max
}

// cdf returns points (latency, share of samples at most it) at every
// non-empty bucket.
func (h *histogram) cdf() (xs []time.Duration, ys []float64) {
	if h.n == 0 {
		return nil, nil
	}
	var seen uint64
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		xs = append(xs, min(bucketUpper(b), h.max))
		ys = append(ys, float64(seen)/float64(h.n))
	}
	return xs, ys
}

// histSet is named histograms in order of creation. Not safe for
// concurrent use.
type histSet struct {
	hists map[string]*histogram
	order []string
}

// get returns the histogram named name, created on first use.
func (s *histSet) get(name string) *histogram {
	h := s.hists[name]
	if h == nil {
		if s.hists == nil {
			s.hists = map[string]*histogram{}
		}
		h = &histogram{}
		s.hists[name] = h
		s.order = append(s.order, name)
	}
	return h
}

// clone returns the names in order of creation and copies of the
// histograms.
func (s *histSet) clone() ([]string, map[string]*histogram) {
	out := make(map[string]*histogram, len(s.hists))
	for k, h := range s.hists {
		c := &histogram{}
		c.merge(h)
		out[k] = c
	}
	return append([]string(nil), s.order...), out
}

// Latency summarizes a distribution, in milliseconds.
type Latency struct {
	Samples uint64  `json:"samples"`
	P50     float64 `json:"p50_ms"`
	P90     float64 `json:"p90_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
	Mean    float64 `json:"mean_ms"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func (h *histogram) summary() Latency {
	l := Latency{Samples: h.n, P50: ms(h.quantile(.5)), P90: ms(h.quantile(.9)), P99: ms(h.quantile(.99)), Max: ms(h.max)}
	if h.n > 0 {
		l.Mean = ms(h.sum / time.Duration(h.n))
	}
	return l
}
