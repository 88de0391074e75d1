package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Scale is how much work each operation does. Every operation does a fixed
// amount of work, the same against every target, so that figures compare.
type Scale struct {
	Writers       int // concurrent clients of create, update, get and mixed
	Creates       int
	Updates       int
	Gets          int
	SmallList     int // objects in the small list
	SmallLists    int // lists of it, one after the other
	BigList       int // objects in the big list
	BigLists      int
	Watchers      int // watch fan-out: watchers of one resource
	WatchWrites   int // measured writes, each waited for by every watcher
	MixedOps      int
	MixedWatchers int // watchers attached during the mixed load
}

// FullScale is what `make bench` measures. The fan-out makes 200 writes,
// so that its p99 until the last watcher (Percentile) is the third-slowest
// write, not the slowest, as it was with 50.
func FullScale() Scale {
	return Scale{Writers: 16, Creates: 4000, Updates: 4000, Gets: 8000,
		SmallList: 100, SmallLists: 200, BigList: 10000, BigLists: 20,
		Watchers: 1000, WatchWrites: 200, MixedOps: 4000, MixedWatchers: 100}
}

// QuickScale is BENCH_QUICK=1: the same operations, smaller, in about a
// minute per target.
func QuickScale() Scale {
	return Scale{Writers: 16, Creates: 800, Updates: 800, Gets: 1500,
		SmallList: 100, SmallLists: 50, BigList: 1000, BigLists: 10,
		Watchers: 100, WatchWrites: 20, MixedOps: 800, MixedWatchers: 20}
}

// ScaleFromEnv is QuickScale when BENCH_QUICK is set to anything but "" or
// "0", FullScale otherwise.
func ScaleFromEnv() Scale {
	if q := os.Getenv("BENCH_QUICK"); q != "" && q != "0" {
		return QuickScale()
	}
	return FullScale()
}

// Result is one operation's run: how many operations, how long in all,
// and the latency of each (sorted).
type Result struct {
	Ops       int
	Elapsed   time.Duration
	Latencies []time.Duration
	// Last holds, for watch fan-out, the time from each write until its
	// last watcher had it.
	Last []time.Duration
	// Wire holds, for lists, the latency until the whole response body
	// had arrived, before the client decoded it (sorted).
	Wire []time.Duration
	// BodyBytes is, for lists, the size of a response body.
	BodyBytes int
	// ServerCPU is the CPU time the server's processes used while the
	// operations ran, when ctx carried a Meter (WithMeter); for watch
	// fan-out, during the measured writes and their deliveries.
	ServerCPU time.Duration
}

// A Meter returns the CPU time the server under load has used so far (all
// its processes: kube-apiserver and etcd, or every root replica).
type Meter func() (time.Duration, error)

type meterKey struct{}

// WithMeter returns a context whose operations also measure the server's
// CPU time with m (Result.ServerCPU).
func WithMeter(ctx context.Context, m Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// metering starts measuring the server's CPU time, when ctx carries a
// Meter; the function it returns gives the CPU used since (zero without a
// Meter).
func metering(ctx context.Context) (func() (time.Duration, error), error) {
	m, _ := ctx.Value(meterKey{}).(Meter)
	if m == nil {
		return func() (time.Duration, error) { return 0, nil }, nil
	}
	start, err := m()
	if err != nil {
		return nil, fmt.Errorf("server CPU: %w", err)
	}
	return func() (time.Duration, error) {
		end, err := m()
		if err != nil {
			return 0, fmt.Errorf("server CPU: %w", err)
		}
		return end - start, nil
	}, nil
}

// OpsPerSec is the throughput over the whole run.
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Percentile returns the q-quantile (0 < q <= 1) of sorted latencies, by
// the nearest-rank method; zero when there are none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Config returns a copy of cfg without a client-side rate limit, so that
// the benchmarks measure the server.
func Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	c.RateLimiter = nil
	return c
}

// ConfigMap is the object every operation writes: about 250 bytes of JSON,
// like test/e2e's benchmarks.
func ConfigMap(name string, seq int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "true"}},
		Data: map[string]string{"seq": strconv.Itoa(seq), "key": "value",
			"other": "some longer value to make the object realistic"},
	}
}

// EnsureNamespace creates ns unless it exists.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// parallel runs n operations over workers goroutines (op gets the worker
// and the operation's index) and times each. It stops at the first error.
func parallel(ctx context.Context, workers, n int, op func(ctx context.Context, worker, i int) error) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	cpu, err := metering(ctx)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				if err := op(ctx, w, i); err != nil {
					cancel(fmt.Errorf("operation %d: %w", i, err))
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	used, err := cpu()
	if err != nil {
		return Result{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return Result{Ops: n, Elapsed: elapsed, Latencies: all, ServerCPU: used}, nil
}

// Creates creates n ConfigMaps named prefix-<i> in ns from writers clients.
func Creates(ctx context.Context, cs kubernetes.Interface, ns, prefix string, writers, n int) (Result, error) {
	return parallel(ctx, writers, n, func(ctx context.Context, _, i int) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ConfigMap(fmt.Sprintf("%s-%d", prefix, i), i), metav1.CreateOptions{})
		return err
	})
}

// Updates creates ten ConfigMaps per writer (not timed), then each writer
// updates its own, in turn, with the object the last write returned (no
// conflicts): n updates in all.
func Updates(ctx context.Context, cs kubernetes.Interface, ns string, writers, n int) (Result, error) {
	const per = 10
	own := make([][]*corev1.ConfigMap, writers)
	var mu sync.Mutex
	if _, err := parallel(ctx, writers, writers*per, func(ctx context.Context, _, i int) error {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ConfigMap(fmt.Sprintf("up-%d-%d", i%writers, i/writers), 0), metav1.CreateOptions{})
		if err == nil {
			mu.Lock()
			own[i%writers] = append(own[i%writers], cm)
			mu.Unlock()
		}
		return err
	}); err != nil {
		return Result{}, err
	}
	turn := make([]int, writers)
	return parallel(ctx, writers, n, func(ctx context.Context, w, i int) error {
		k := turn[w] % len(own[w])
		turn[w]++
		cm := own[w][k].DeepCopy()
		cm.Data["seq"] = strconv.Itoa(i)
		out, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			own[w][k] = out
		}
		return err
	})
}

// Gets reads the objects named names (cycling) n times from readers clients.
func Gets(ctx context.Context, cs kubernetes.Interface, ns string, names []string, readers, n int) (Result, error) {
	return parallel(ctx, readers, n, func(ctx context.Context, _, i int) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, names[i%len(names)], metav1.GetOptions{})
		return err
	})
}

// Lists lists ns n times, one after the other, and checks each list holds
// want objects. It makes the request the typed client's List makes
// (protobuf unless cs was configured for another), in two steps, so that Wire has the latency until the response body was in and
// Latencies the latency once decoded.
func Lists(ctx context.Context, cs kubernetes.Interface, ns string, want, n int) (Result, error) {
	wire := make([]time.Duration, 0, n)
	body := 0
	r, err := parallel(ctx, 1, n, func(ctx context.Context, _, _ int) error {
		start := time.Now()
		res := cs.CoreV1().RESTClient().Get().UseProtobufAsDefault().Namespace(ns).Resource("configmaps").
			VersionedParams(&metav1.ListOptions{}, scheme.ParameterCodec).Do(ctx)
		wire = append(wire, time.Since(start))
		if raw, err := res.Raw(); err == nil {
			body = len(raw)
		}
		var l corev1.ConfigMapList
		err := res.Into(&l)
		if err == nil && len(l.Items) != want {
			err = fmt.Errorf("listed %d ConfigMaps, want %d", len(l.Items), want)
		}
		return err
	})
	slices.Sort(wire)
	r.Wire, r.BodyBytes = wire, body
	return r, err
}

// WatchFanout starts watchers watches on ConfigMaps in ns, then updates one
// ConfigMap writes times, each time waiting until every watcher has seen
// the update before the next. Latencies are per (write, watcher): from
// just before the write's request to the watcher's receipt; Last is per
// write, until its last watcher. One unmeasured write first checks that
// every watch delivers.
//
// The watchers are client-go's (Watch, decoding every event); for
// WatchFanoutWire, readers of the response stream.
func WatchFanout(ctx context.Context, cs kubernetes.Interface, ns string, watchers, writes int) (Result, error) {
	return watchFanout(ctx, cs, ns, watchers, writes, false)
}

// WatchFanoutWire is WatchFanout with watchers that read the response
// stream and only find where each event ends and its sequence number in
// the bytes (readWire): the figures are then the server's fan-out rather
// than the client's decoding, which on a machine shared by both weighs as
// much.
func WatchFanoutWire(ctx context.Context, cs kubernetes.Interface, ns string, watchers, writes int) (Result, error) {
	return watchFanout(ctx, cs, ns, watchers, writes, true)
}

func watchFanout(ctx context.Context, cs kubernetes.Interface, ns string, watchers, writes int, wire bool) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ConfigMap("fanout", 0), metav1.CreateOptions{})
	if err != nil {
		return Result{}, err
	}
	total := writes + 1 // seq 1 is the warm-up
	arrived := make([][]time.Time, total+1)
	for s := range arrived {
		arrived[s] = make([]time.Time, watchers)
	}
	counts := make([]atomic.Int64, total+1)
	done := make([]chan struct{}, total+1)
	for s := range done {
		done[s] = make(chan struct{})
	}
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}

	got := func(i, s int, now time.Time) {
		if s < 1 || s > total || !arrived[s][i].IsZero() {
			return
		}
		arrived[s][i] = now
		if counts[s].Add(1) == int64(watchers) {
			close(done[s])
		}
	}
	// The watches live on ctx, not on parallel's context (cancelled when it returns).
	opts := metav1.ListOptions{ResourceVersion: cm.ResourceVersion}
	ws := make([]watch.Interface, watchers)
	streams := make([]io.ReadCloser, watchers)
	if _, err := parallel(ctx, 16, watchers, func(_ context.Context, _, i int) error {
		var err error
		if wire {
			streams[i], err = wireWatch(ctx, cs, ns, opts)
		} else {
			ws[i], err = cs.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
		}
		return err
	}); err != nil {
		return Result{}, fmt.Errorf("starting watchers: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for i := range watchers {
			if ws[i] != nil {
				ws[i].Stop()
			}
			if streams[i] != nil {
				streams[i].Close()
			}
		}
	}()
	for i := range watchers {
		if wire {
			wg.Go(func() {
				err := readWire(streams[i], func(frame []byte) {
					if s, ok := seqOf(frame); ok {
						got(i, s, time.Now())
					}
				})
				if err != nil && ctx.Err() == nil {
					fail(fmt.Errorf("watcher %d: %w", i, err))
				}
			})
			continue
		}
		wg.Go(func() {
			for ev := range ws[i].ResultChan() {
				now := time.Now()
				switch ev.Type {
				case watch.Modified:
				case watch.Error:
					fail(fmt.Errorf("watcher %d: %v", i, apierrors.FromObject(ev.Object)))
					return
				default:
					continue
				}
				obj, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || obj.Name != "fanout" {
					continue
				}
				if s, err := strconv.Atoi(strings.TrimPrefix(obj.Data["seq"], seqMark)); err == nil {
					got(i, s, now)
				}
			}
		})
	}

	sent := make([]time.Time, total+1)
	var cpu func() (time.Duration, error)
	for s := 1; s <= total; s++ {
		if s == 2 { // after the warm-up
			if cpu, err = metering(ctx); err != nil {
				return Result{}, err
			}
		}
		next := cm.DeepCopy()
		next.Data["seq"] = seqMark + strconv.Itoa(s)
		sent[s] = time.Now()
		if cm, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return Result{}, fmt.Errorf("write %d: %w", s, err)
		}
		select {
		case <-done[s]:
		case err := <-failed:
			return Result{}, err
		case <-time.After(60 * time.Second):
			return Result{}, fmt.Errorf("write %d: %d of %d watchers had it after 60 s", s, counts[s].Load(), watchers)
		}
	}
	var r Result
	if cpu != nil {
		if r.ServerCPU, err = cpu(); err != nil {
			return Result{}, err
		}
	}
	for s := 2; s <= total; s++ {
		var last time.Duration
		for _, at := range arrived[s] {
			d := at.Sub(sent[s])
			r.Latencies = append(r.Latencies, d)
			last = max(last, d)
		}
		r.Last = append(r.Last, last)
		r.Elapsed += last
	}
	r.Ops = writes
	slices.Sort(r.Latencies)
	slices.Sort(r.Last)
	return r, nil
}

// seqMark starts the sequence number of a fan-out write in the ConfigMap,
// so that a wire watcher finds it in the event's bytes, protobuf or JSON.
const seqMark = "fanout-seq-"

// protoErrorType is metav1.WatchEvent's type field (1, a string) set to
// ERROR, as it appears in a protobuf frame.
var protoErrorType = []byte("\x0a\x05ERROR")

// readWire reads a watch response stream, protobuf (frames of a 4-byte
// big-endian length) or JSON (one event per line), and calls each with
// every event's bytes (valid until the next call), until the stream ends.
// An ERROR event fails it.
func readWire(r io.Reader, each func(frame []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := br.Peek(1)
	if err != nil {
		return err
	}
	json := first[0] == '{'
	var frame []byte
	for {
		if json {
			if frame, err = br.ReadSlice('\n'); err != nil {
				return err
			}
		} else {
			var n [4]byte
			if _, err := io.ReadFull(br, n[:]); err != nil {
				return err
			}
			frame = slices.Grow(frame[:0], int(binary.BigEndian.Uint32(n[:])))[:binary.BigEndian.Uint32(n[:])]
			if _, err := io.ReadFull(br, frame); err != nil {
				return err
			}
		}
		if bytes.HasPrefix(frame, []byte(`{"type":"ERROR"`)) || bytes.Contains(frame, protoErrorType) {
			return fmt.Errorf("error event: %q", frame)
		}
		each(frame)
	}
}

// seqOf finds the fan-out sequence number (seqMark) in an event's bytes.
func seqOf(frame []byte) (int, bool) {
	i := bytes.Index(frame, []byte(seqMark))
	if i < 0 {
		return 0, false
	}
	digits := frame[i+len(seqMark):]
	end := 0
	for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
		end++
	}
	s, err := strconv.Atoi(string(digits[:end]))
	return s, err == nil
}

// wireWatch opens a watch of ConfigMaps in ns as a response stream, for
// readWire, in the wire format the typed client would use: protobuf
// unless cs was configured for another (as the JSON clients are).
func wireWatch(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (io.ReadCloser, error) {
	opts.Watch = true
	return cs.CoreV1().RESTClient().Get().UseProtobufAsDefault().Namespace(ns).Resource("configmaps").
		VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
}

// Mixed runs n operations from workers clients while watchers watch ns: 30 %
// creates, 30 % updates of the worker's own objects, 30 % gets of them and
// 10 % lists of listNS (which holds a fixed set of objects), chosen by a
// fixed seed per worker. The watchers read their response streams without
// decoding them (readWire): they make the server fan every write out, as
// controllers' watches would, without the load generator's own decoding,
// the same against every target, taking the shared cores (with client-go's
// JSON decoding, it took three quarters of the CPU of mixed-json).
func Mixed(ctx context.Context, cs kubernetes.Interface, ns, listNS string, workers, n, watchers int) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	events := make([]atomic.Int64, watchers)
	failed := make(chan error, watchers)
	for i := range watchers {
		r, err := wireWatch(ctx, cs, ns, metav1.ListOptions{})
		if err != nil {
			return Result{}, fmt.Errorf("watcher: %w", err)
		}
		wg.Go(func() {
			defer r.Close()
			if err := readWire(r, func([]byte) { events[i].Add(1) }); err != nil && ctx.Err() == nil {
				failed <- fmt.Errorf("watcher %d: %w", i, err)
			}
		})
	}
	own := make([][]*corev1.ConfigMap, workers)
	rnd := make([]*rand.Rand, workers)
	for w := range workers {
		rnd[w] = rand.New(rand.NewPCG(uint64(w), 10))
	}
	r, err := parallel(ctx, workers, n, func(ctx context.Context, w, i int) error {
		c := cs.CoreV1().ConfigMaps(ns)
		p := rnd[w].IntN(100)
		switch {
		case p < 30 || len(own[w]) == 0:
			cm, err := c.Create(ctx, ConfigMap(fmt.Sprintf("mx-%d-%d", w, i), i), metav1.CreateOptions{})
			if err == nil {
				own[w] = append(own[w], cm)
			}
			return err
		case p < 60:
			k := rnd[w].IntN(len(own[w]))
			cm := own[w][k].DeepCopy()
			cm.Data["seq"] = strconv.Itoa(i)
			out, err := c.Update(ctx, cm, metav1.UpdateOptions{})
			if err == nil {
				own[w][k] = out
			}
			return err
		case p < 90:
			_, err := c.Get(ctx, own[w][rnd[w].IntN(len(own[w]))].Name, metav1.GetOptions{})
			return err
		default:
			_, err := cs.CoreV1().ConfigMaps(listNS).List(ctx, metav1.ListOptions{})
			return err
		}
	})
	if err != nil {
		return Result{}, err
	}
	// Every watcher had events: the server fanned the writes out.
	for i := range events {
		if events[i].Load() == 0 {
			return Result{}, fmt.Errorf("watcher %d had no event", i)
		}
	}
	select {
	case err := <-failed:
		return Result{}, err
	default:
	}
	return r, nil
}
