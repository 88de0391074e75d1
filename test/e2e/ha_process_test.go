package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// haNode is one replica of a replicated root, run as `relay --role=root`
// in its own process group on loopback. Its addresses and data directory
// stay the same across restarts.
type haNode struct {
	name, dir             string
	api, link, raft, peer string
	join                  []string // gossip addresses of other replicas
	expect                int      // --bootstrap-expect, 0 for none
	extra                 []string // more flags (--snapshot-threshold, ...)

	proc *procs.Process // the running one, once started
}

// start runs the replica in a process group of its own; t.Cleanup kills
// the group.
func (n *haNode) start(t *testing.T) {
	t.Helper()
	args := []string{"--role=root", "--name=" + n.name, "--data-dir=" + n.dir,
		"--api-addr=" + n.api, "--link-addr=" + n.link, "--raft-addr=" + n.raft, "--peer-addr=" + n.peer}
	if len(n.join) > 0 {
		args = append(args, "--join="+strings.Join(n.join, ","))
	}
	if n.expect > 0 {
		args = append(args, fmt.Sprintf("--bootstrap-expect=%d", n.expect))
	}
	args = append(args, n.extra...)
	cmd := exec.Command(relaybin.For(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	n.proc = procs.Start(t, n.name, cmd)
}

var (
	leadingLine = regexp.MustCompile(`msg=leading relay=\S+ term=(\d+)`)
	lostLine    = regexp.MustCompile(`msg="lost leadership" relay=\S+ term=(\d+)`)
)

// leaderTerm is the term this replica leads according to its log ("leading"
// without a later "lost leadership" for that term), or 0. The log gives
// the term with the leadership, which the kill loops need; `relay
// members` shows the leader too (haCluster.members).
func (n *haNode) leaderTerm() int {
	if n.proc == nil || n.proc.Exited() != nil {
		return 0
	}
	out := n.proc.Output()
	maxTerm := func(re *regexp.Regexp) int {
		m := 0
		for _, s := range re.FindAllStringSubmatch(out, -1) {
			v, _ := strconv.Atoi(s[1])
			m = max(m, v)
		}
		return m
	}
	lead := maxTerm(leadingLine)
	if lead == 0 || maxTerm(lostLine) >= lead {
		return 0
	}
	return lead
}

// haCluster is a set of root replicas sharing one PKI.
type haCluster struct {
	t      *testing.T
	base   string
	bundle []byte // relay pki export of the first replica
	token  string
	caPEM  []byte
	nodes  []*haNode
	extra  []string // flags every replica gets
}

func (c *haCluster) newNode(name string) *haNode {
	return &haNode{name: name, dir: filepath.Join(c.base, name), extra: c.extra,
		api: procs.FreeAddr(c.t), link: procs.FreeAddr(c.t), raft: procs.FreeAddr(c.t), peer: procs.FreeAddr(c.t)}
}

// startHACluster starts n replicas that bootstrap together
// (--bootstrap-expect=n, each joining the others). As docs/ha.md says, the
// first replica creates the PKI, `relay pki export` prints it and `relay
// pki import` installs it in the others' data directories before their
// first start. extra flags are given to every replica.
func startHACluster(t *testing.T, n int, extra ...string) *haCluster {
	t.Helper()
	c := &haCluster{t: t, base: t.TempDir(), extra: extra}
	for i := range n {
		c.nodes = append(c.nodes, c.newNode(fmt.Sprintf("root-%d", i)))
	}
	for _, a := range c.nodes {
		a.expect = n
		for _, b := range c.nodes {
			if b != a {
				a.join = append(a.join, b.peer)
			}
		}
	}
	c.nodes[0].start(t)
	poll.Until(t, "relay pki export from the first replica", func() error {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(relaybin.For(t), "pki", "export", "--data-dir="+c.nodes[0].dir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("relay pki export: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		c.bundle = stdout.Bytes()
		return nil
	})
	for _, node := range c.nodes[1:] {
		c.importPKI(node)
		node.start(t)
	}
	token, err := os.ReadFile(filepath.Join(pki.Dir(c.nodes[0].dir), pki.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(string(token))
	if c.caPEM, err = os.ReadFile(filepath.Join(pki.Dir(c.nodes[0].dir), pki.CACertFile)); err != nil {
		t.Fatal(err)
	}
	c.waitReady(60*time.Second, c.nodes...)
	return c
}

// importPKI runs `relay pki import` into node's data directory.
func (c *haCluster) importPKI(node *haNode) {
	c.t.Helper()
	cmd := exec.Command(relaybin.For(c.t), "pki", "import", "--data-dir="+node.dir)
	cmd.Stdin = bytes.NewReader(c.bundle)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("relay pki import into %s: %v: %s", node.name, err, out)
	}
}

// restConfig is the admin's client configuration for one replica's URL.
func (c *haCluster) restConfig(node *haNode) *rest.Config {
	return &rest.Config{
		Host:            "https://" + node.api,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
		QPS:             -1,
		Timeout:         10 * time.Second,
	}
}

func (c *haCluster) client(node *haNode) *kubernetes.Clientset {
	c.t.Helper()
	cs, err := kubernetes.NewForConfig(c.restConfig(node))
	if err != nil {
		c.t.Fatal(err)
	}
	return cs
}

// ready checks /readyz of one replica.
func (c *haCluster) ready(cs *kubernetes.Clientset) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(b)); s != "ok" {
		return fmt.Errorf("readyz: %q", s)
	}
	return nil
}

// waitReady waits until every node answers /readyz; a node that exits
// fails the test.
func (c *haCluster) waitReady(timeout time.Duration, nodes ...*haNode) {
	c.t.Helper()
	css := make([]*kubernetes.Clientset, len(nodes))
	for i, n := range nodes {
		css[i] = c.client(n)
	}
	poll.Until(c.t, "the replicas ready", func() error {
		for i, n := range nodes {
			if err := n.proc.Exited(); err != nil {
				c.t.Fatalf("%v:\n%s", err, n.proc.Tail(procs.TailLines))
			}
			if err := c.ready(css[i]); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	}, poll.For(timeout))
}

// waitLeader waits until a running replica leads a term after the given
// one and returns it and its term.
func (c *haCluster) waitLeader(after int, timeout time.Duration) (*haNode, int) {
	c.t.Helper()
	var leader *haNode
	term := 0
	poll.Until(c.t, "a leader elected", func() error {
		leader, term = nil, 0
		for _, n := range c.nodes {
			if lt := n.leaderTerm(); lt > after && lt > term {
				leader, term = n, lt
			}
		}
		if leader == nil {
			return fmt.Errorf("no replica leads a term after %d", after)
		}
		return nil
	}, poll.For(timeout))
	return leader, term
}

// A register per key (a ConfigMap's data "v" and its resourceVersion),
// written unconditionally (put: update without resourceVersion) or with
// compare-and-set (cas: update pinned to a resourceVersion read before)
// and read without resourceVersion (get, linearizable).
type regOp int

const (
	opGet regOp = iota
	opPut
	opCAS
)

type regInput struct {
	op     regOp
	key    string
	value  string
	expect int64 // cas: the resourceVersion the update is pinned to
}

type regOutput struct {
	value    string
	rv       int64
	conflict bool // cas answered 409
	unknown  bool // outcome unknown (504, timeout, connection lost)
}

// regState is one register; rv 0 means not known (after a write whose
// outcome is unknown, until a read shows it).
type regState struct {
	value string
	rv    int64
}

// registerModel is porcupine's model of the registers, partitioned by key.
// resourceVersions are Raft indexes: a write's is larger than the one it
// replaces, and a read returns exactly the last write's. A write whose
// outcome is unknown has Return = MaxInt64 (it may take effect at any time
// after its call, or never: porcupine may put it last).
var registerModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch in.op {
		case opGet:
			if out.value != st.value || (st.rv != 0 && out.rv != st.rv) {
				return nil
			}
			return []any{regState{st.value, out.rv}}
		case opPut:
			if out.unknown {
				return []any{regState{in.value, 0}, st}
			}
			if st.rv != 0 && out.rv <= st.rv {
				return nil
			}
			return []any{regState{in.value, out.rv}}
		default: // opCAS
			switch {
			case out.unknown:
				if st.rv != 0 && st.rv != in.expect {
					return []any{st}
				}
				return []any{regState{in.value, 0}, st}
			case out.conflict:
				if st.rv == in.expect {
					return nil
				}
				return []any{st}
			}
			if (st.rv != 0 && st.rv != in.expect) || out.rv <= in.expect {
				return nil
			}
			return []any{regState{in.value, out.rv}}
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := fmt.Sprintf("rv %d", out.rv)
		switch {
		case out.unknown:
			res = "unknown"
		case out.conflict:
			res = "conflict"
		}
		switch in.op {
		case opGet:
			return fmt.Sprintf("get(%s) -> %q rv %d", in.key, out.value, out.rv)
		case opPut:
			return fmt.Sprintf("put(%s, %s) -> %s", in.key, in.value, res)
		}
		return fmt.Sprintf("cas(%s, %s, rv %d) -> %s", in.key, in.value, in.expect, res)
	},
	DescribeState: func(state any) string {
		st := state.(regState)
		return fmt.Sprintf("%q rv %d", st.value, st.rv)
	},
}).ToModel()

// haWrite is one write of the history, for the lost-write check and the
// availability gaps.
type haWrite struct {
	key, value string
	call, ret  time.Duration
	rv         int64
	acked      bool
}

// haHistory records operations with times relative to its start.
type haHistory struct {
	start  time.Time
	mu     sync.Mutex
	ops    []porcupine.Operation
	writes []haWrite
}

func (h *haHistory) now() time.Duration { return time.Since(h.start) }

func (h *haHistory) add(client int, via string, in regInput, out regOutput, call, ret time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := int64(ret)
	if out.unknown {
		r = math.MaxInt64
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(call), Output: out, Return: r, Metadata: via})
	if in.op != opGet && !out.conflict {
		h.writes = append(h.writes, haWrite{key: in.key, value: in.value, call: call, ret: ret, rv: out.rv, acked: !out.unknown})
	}
}

// outcome classifies a write's error as a client sees it.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeConflict
	outcomeNotApplied // certainly not applied: refused connection, 503 (no leader)
	outcomeUnknown    // 504, timeout, connection lost after sending
	outcomeUnexpected
)

func classify(err error) outcome {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return outcomeOK
	case apierrors.IsConflict(err):
		return outcomeConflict
	case errors.Is(err, syscall.ECONNREFUSED), apierrors.IsServiceUnavailable(err):
		return outcomeNotApplied
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), !errors.As(err, &status):
		return outcomeUnknown
	}
	return outcomeUnexpected
}

// haClient is one client-go user pinned to a home replica; when a request
// fails without an answer from the server it moves on to the next replica
// (as a user with several server URLs would), and goes home again after a
// second. A read and the compare-and-set that follows it go to the same
// replica (see pick).
type haClient struct {
	id       int
	home     int
	target   int
	switched time.Time
	css      []*kubernetes.Clientset // one per replica URL
}

// pick chooses the replica for the next operation, or pair of operations
// (a get and the update pinned to what it returned): a pair split across
// two replicas can get a 409 for a current resourceVersion from a replica
// that has not applied it yet (kubeapi's guaranteedUpdate checks the pin
// against the local store without waiting for it).
func (c *haClient) pick() {
	if c.target != c.home && time.Since(c.switched) > time.Second {
		c.target = c.home
	}
}

func (c *haClient) cs() *kubernetes.Clientset { return c.css[c.target] }

// failed moves to the next replica after an error without a kube status.
func (c *haClient) failed(err error) {
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) {
		c.target, c.switched = (c.target+1)%len(c.css), time.Now()
	}
}

const haNamespace = "default"

func registerCM(key, value, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key, Namespace: haNamespace, ResourceVersion: rv},
		Data: map[string]string{"v": value}}
}

func parseRV(t *testing.T, rv string) int64 {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v <= 0 {
		t.Errorf("resourceVersion %q is not a positive integer", rv)
	}
	return v
}

// TestHAProcessLinearizable runs three `relay --role=root` processes, four
// client-go writers (unconditional updates, and compare-and-set: a get then
// an update pinned to its resourceVersion, of five ConfigMaps) and two
// readers (gets without resourceVersion), each pinned to one replica and
// moving to another while theirs is down. It kills the leader with SIGKILL
// three times, restarting it from its data directory each time, and checks
// the recorded history with porcupine. Every acknowledged write survives
// (the final state is the latest acknowledged write of each key, or a later
// write whose outcome was unknown), and the gap from each kill to the next
// acknowledged write is logged.
func TestHAProcessLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas and kills the leader three times")
	}
	t.Parallel()
	c := startHACluster(t, 3)
	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	h := &haHistory{start: time.Now()}

	// The initial values are the first writes of the history.
	setup := c.client(c.nodes[0])
	for _, k := range keys {
		call := h.now()
		cm, err := setup.CoreV1().ConfigMaps(haNamespace).Create(t.Context(), registerCM(k, "init-"+k, ""), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
		h.add(0, c.nodes[0].name, regInput{op: opPut, key: k, value: "init-" + k}, regOutput{rv: parseRV(t, cm.ResourceVersion)}, call, h.now())
	}

	var (
		stop                                        atomic.Bool
		wg                                          sync.WaitGroup
		puts, cas, conflicts, gets, unknown, unsent atomic.Int64
		putConflicts                                atomic.Int64
	)
	newClient := func(id, home int) *haClient {
		cl := &haClient{id: id, home: home, target: home}
		for _, n := range c.nodes {
			cl.css = append(cl.css, c.client(n))
		}
		return cl
	}
	// get reads key through cl and records the read.
	get := func(cl *haClient, key string) (*corev1.ConfigMap, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		cs, via := cl.cs(), c.nodes[cl.target].name
		call := h.now()
		cm, err := cs.CoreV1().ConfigMaps(haNamespace).Get(ctx, key, metav1.GetOptions{})
		ret := h.now()
		if err != nil {
			var status apierrors.APIStatus
			if errors.As(err, &status) && !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) {
				t.Errorf("client %d: get %s: %v", cl.id, key, err)
			}
			cl.failed(err)
			return nil, false
		}
		gets.Add(1)
		h.add(cl.id, via, regInput{op: opGet, key: key}, regOutput{value: cm.Data["v"], rv: parseRV(t, cm.ResourceVersion)}, call, ret)
		return cm, true
	}
	// write updates key through cl, pinned to rv unless it is empty, and
	// records the write.
	write := func(cl *haClient, key, value, rv string) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		in := regInput{op: opPut, key: key, value: value}
		if rv != "" {
			in.op, in.expect = opCAS, parseRV(t, rv)
		}
		cs, via := cl.cs(), c.nodes[cl.target].name
		call := h.now()
		cm, err := cs.CoreV1().ConfigMaps(haNamespace).Update(ctx, registerCM(key, value, rv), metav1.UpdateOptions{})
		ret := h.now()
		cl.failed(err)
		switch classify(err) {
		case outcomeOK:
			if in.op == opPut {
				puts.Add(1)
			} else {
				cas.Add(1)
			}
			h.add(cl.id, via, in, regOutput{rv: parseRV(t, cm.ResourceVersion)}, call, ret)
		case outcomeConflict:
			if in.op == opPut {
				// An update without resourceVersion retries its
				// read-modify-write on the server; a 409 means it gave up.
				putConflicts.Add(1)
				t.Errorf("client %d: update of %s without resourceVersion answered 409: %v", cl.id, key, err)
				return
			}
			conflicts.Add(1)
			h.add(cl.id, via, in, regOutput{conflict: true}, call, ret)
		case outcomeNotApplied:
			unsent.Add(1)
		case outcomeUnknown:
			unknown.Add(1)
			h.add(cl.id, via, in, regOutput{unknown: true}, call, ret)
		default:
			t.Errorf("client %d: update %s: %v", cl.id, key, err)
		}
	}
	for w := range 4 {
		cl := newClient(w, w%3)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			for seq := 0; !stop.Load(); seq++ {
				cl.pick()
				key, value := keys[rng.IntN(len(keys))], fmt.Sprintf("w%d-%d", w, seq)
				if rng.IntN(2) == 0 {
					write(cl, key, value, "")
					continue
				}
				if cur, ok := get(cl, key); ok {
					write(cl, key, value, cur.ResourceVersion)
				}
			}
		})
	}
	for r := range 2 {
		cl := newClient(4+r, 1+r)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(4+r), 8))
			for !stop.Load() {
				cl.pick()
				get(cl, keys[rng.IntN(len(keys))])
			}
		})
	}
	ops := func() int64 { return puts.Load() + cas.Load() + gets.Load() }
	atLeast := func(n int64) func() error {
		return func() error {
			if got := ops(); got < n {
				return fmt.Errorf("%d operations done, waiting for %d", got, n)
			}
			return nil
		}
	}
	poll.Until(t, "200 operations", atLeast(200))

	type kill struct {
		victim, successor string
		at, elected       time.Duration
	}
	var kills []kill
	term := 0
	for range 3 {
		leader, lt := c.waitLeader(term-1, 20*time.Second) // the current leader
		k := kill{victim: leader.name, at: h.now()}
		leader.proc.Kill(t)
		next, nt := c.waitLeader(lt, 20*time.Second)
		k.elected, k.successor, term = h.now()-k.at, next.name, nt
		// Service resumes: a write called after the kill is acknowledged.
		poll.Until(t, "a write after the kill acknowledged", func() error {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, w := range h.writes {
				if w.acked && w.call >= k.at {
					return nil
				}
			}
			return errors.New("no write called after the kill acknowledged yet")
		})
		kills = append(kills, k)
		leader.start(t)
		c.waitReady(30*time.Second, leader)
		poll.Until(t, "100 more operations", atLeast(ops()+100))
	}
	stop.Store(true)
	wg.Wait()

	// Final reads from every replica, part of the history: each key's
	// latest acknowledged write, or a later write whose outcome was
	// unknown, is what all replicas return.
	c.waitReady(30*time.Second, c.nodes...)
	final := map[string]*corev1.ConfigMap{}
	for i, n := range c.nodes {
		cs := c.client(n)
		for _, k := range keys {
			call := h.now()
			cm, err := cs.CoreV1().ConfigMaps(haNamespace).Get(t.Context(), k, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("final get %s from %s: %v", k, n.name, err)
			}
			h.add(6+i, n.name, regInput{op: opGet, key: k}, regOutput{value: cm.Data["v"], rv: parseRV(t, cm.ResourceVersion)}, call, h.now())
			if prev, ok := final[k]; ok && (prev.Data["v"] != cm.Data["v"] || prev.ResourceVersion != cm.ResourceVersion) {
				t.Errorf("%s: %s has %q rv %s, %s has %q rv %s", k, c.nodes[0].name, prev.Data["v"], prev.ResourceVersion, n.name, cm.Data["v"], cm.ResourceVersion)
			}
			final[k] = cm
		}
	}
	ackedRVs := map[int64]string{}
	for _, w := range h.writes {
		if !w.acked {
			continue
		}
		if other, dup := ackedRVs[w.rv]; dup {
			t.Errorf("writes %s and %s were both acknowledged with resourceVersion %d", other, w.value, w.rv)
		}
		ackedRVs[w.rv] = w.value
		cm := final[w.key]
		frv := parseRV(t, cm.ResourceVersion)
		if w.rv > frv || (w.rv == frv && w.value != cm.Data["v"]) {
			t.Errorf("acknowledged write lost: %s=%s (rv %d, acknowledged at %v); the replicas hold %q rv %d",
				w.key, w.value, w.rv, w.ret.Round(time.Millisecond), cm.Data["v"], frv)
		}
	}

	for i, k := range kills {
		gap := time.Duration(-1)
		for _, w := range h.writes {
			if w.acked && w.call >= k.at && (gap < 0 || w.ret-k.at < gap) {
				gap = w.ret - k.at
			}
		}
		t.Logf("kill %d: leader %s killed at %v; %s leads after %v; next acknowledged write after %v",
			i+1, k.victim, k.at.Round(time.Millisecond), k.successor, k.elected.Round(time.Millisecond), gap.Round(time.Millisecond))
	}

	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(registerModel, h.ops, 30*time.Second)
	perReplica := map[any]int{}
	for _, op := range h.ops {
		perReplica[op.Metadata]++
	}
	t.Logf("history: %d operations (%d puts, %d compare-and-sets, %d conflicts, %d gets, %d unknown outcomes, %d not sent to a live replica; per replica %v); porcupine: %s in %v",
		len(h.ops), puts.Load(), cas.Load(), conflicts.Load(), gets.Load(), unknown.Load(), unsent.Load(), perReplica, res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("canopy-ha-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		for _, k := range keys {
			var ops []porcupine.Operation
			for _, op := range h.ops {
				if op.Input.(regInput).key == k {
					ops = append(ops, op)
				}
			}
			if porcupine.CheckOperations(registerModel, ops) {
				continue
			}
			sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
			var b strings.Builder
			for _, op := range ops {
				ret := "?"
				if op.Return != math.MaxInt64 {
					ret = time.Duration(op.Return).String()
				}
				fmt.Fprintf(&b, "client %d via %s  %12v .. %12s  %s\n", op.ClientId, op.Metadata, time.Duration(op.Call), ret, registerModel.DescribeOperation(op.Input, op.Output))
			}
			path := filepath.Join(os.TempDir(), fmt.Sprintf("canopy-ha-history-%s-%d.txt", k, time.Now().UnixNano()))
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err == nil {
				t.Logf("history of %s (not linearizable): %s", k, path)
			}
		}
		t.Fatalf("history is not linearizable: %s", res)
	}
	if putConflicts.Load() > 0 {
		t.Errorf("%d updates without resourceVersion answered 409", putConflicts.Load())
	}
}

// haObject is what the restart test remembers of a ConfigMap.
type haObject struct{ value, rv string }

// createWithRetry creates a ConfigMap, retrying while there is no leader
// (503) or the outcome is unknown (504, lost connection: an AlreadyExists
// on the retry means the first attempt was applied; then the object is
// read back).
func createWithRetry(t *testing.T, cs *kubernetes.Clientset, name string) haObject {
	t.Helper()
	var obj haObject
	poll.Until(t, "create "+name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cm, err := cs.CoreV1().ConfigMaps(haNamespace).Create(ctx, registerCM(name, "v-"+name, ""), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cm, err = cs.CoreV1().ConfigMaps(haNamespace).Get(ctx, name, metav1.GetOptions{})
		}
		switch classify(err) {
		case outcomeOK:
			obj = haObject{cm.Data["v"], cm.ResourceVersion}
			return nil
		case outcomeNotApplied, outcomeUnknown:
			return err
		}
		return poll.Stop(err)
	}, poll.Every(200*time.Millisecond))
	return obj
}

// listCMs lists the ConfigMaps of haNamespace: without resourceVersion a
// linearizable list, with "0" the replica's local state.
func listCMs(cs *kubernetes.Clientset, rv string) (map[string]haObject, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().ConfigMaps(haNamespace).List(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return nil, err
	}
	out := map[string]haObject{}
	for _, cm := range list.Items {
		out[cm.Name] = haObject{cm.Data["v"], cm.ResourceVersion}
	}
	return out, nil
}

// holds reports what of want a replica's list lacks or has otherwise.
func holds(got, want map[string]haObject) error {
	var bad []string
	for name, o := range want {
		if g, ok := got[name]; !ok {
			bad = append(bad, name+" missing")
		} else if g != o {
			bad = append(bad, fmt.Sprintf("%s is %v, want %v", name, g, o))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
		}
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// replicaHolds lists haNamespace through cs at each of rvs and reports
// what of want the list lacks or has otherwise.
func replicaHolds(cs *kubernetes.Clientset, want map[string]haObject, rvs ...string) error {
	for _, rv := range rvs {
		got, err := listCMs(cs, rv)
		if err == nil {
			err = holds(got, want)
		}
		if err != nil {
			return fmt.Errorf("list (resourceVersion %q): %w", rv, err)
		}
	}
	return nil
}

// TestHAProcessRestartAndRejoin: three replicas killed with SIGKILL at
// once and restarted from their data directories keep every write; a
// fourth replica started with --join (no --bootstrap-expect) is added and
// catches up; a replica whose data directory is wiped (and the PKI
// imported again) rejoins under its old name and catches up, including
// writes made while it was down.
func TestHAProcessRestartAndRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four replicas")
	}
	t.Parallel()
	c := startHACluster(t, 3)
	want := map[string]haObject{}
	css := make([]*kubernetes.Clientset, len(c.nodes))
	for i, n := range c.nodes {
		css[i] = c.client(n)
	}
	for i := range 30 {
		name := fmt.Sprintf("before-%02d", i)
		want[name] = createWithRetry(t, css[i%3], name)
	}

	// All three killed at once, restarted from disk.
	for _, n := range c.nodes {
		_ = n.proc.Signal(syscall.SIGKILL)
	}
	for _, n := range c.nodes {
		<-n.proc.Done()
	}
	start := time.Now()
	for _, n := range c.nodes {
		n.start(t)
	}
	c.waitReady(60*time.Second, c.nodes...)
	t.Logf("all three killed and restarted: serving again after %v", time.Since(start).Round(time.Millisecond))
	for _, cs := range css {
		if err := replicaHolds(cs, want, ""); err != nil {
			t.Fatalf("after restarting all replicas from disk: %v", err)
		}
	}
	maxRV := int64(0)
	for _, o := range want {
		maxRV = max(maxRV, parseRV(t, o.rv))
	}
	after := createWithRetry(t, css[1], "after-restart")
	if rv := parseRV(t, after.rv); rv <= maxRV {
		t.Errorf("resourceVersion went backwards across the restart: %d <= %d", rv, maxRV)
	}
	want["after-restart"] = after

	// A fourth replica joins through one peer and catches up.
	fourth := c.newNode("root-3")
	fourth.join = []string{c.nodes[0].peer}
	c.importPKI(fourth)
	start = time.Now()
	fourth.start(t)
	c.nodes = append(c.nodes, fourth)
	c.waitReady(60*time.Second, fourth)
	t.Logf("fourth replica serving after %v", time.Since(start).Round(time.Millisecond))
	// The leader made it a voter (only its log tells a process test).
	poll.Until(t, "root-3 added as a voter", func() error {
		for _, n := range c.nodes {
			if strings.Contains(n.proc.Output(), `msg="adding voter" relay=`+n.name+` peer=root-3`) {
				return nil
			}
		}
		return errors.New("no leader logged adding root-3 as a voter")
	})
	csFourth := c.client(fourth)
	css = append(css, csFourth)
	if err := replicaHolds(csFourth, want, "", "0"); err != nil {
		t.Fatalf("fourth replica: %v", err)
	}
	name := "via-fourth"
	want[name] = createWithRetry(t, csFourth, name)

	// A replica's disk is wiped while writes go on; it rejoins under its
	// old name with only the PKI imported again.
	wiped := c.nodes[1]
	wiped.proc.Kill(t)
	for i := range 5 {
		name := fmt.Sprintf("while-wiped-%d", i)
		want[name] = createWithRetry(t, css[[]int{0, 2, 3}[i%3]], name)
	}
	if err := os.RemoveAll(wiped.dir); err != nil {
		t.Fatal(err)
	}
	c.importPKI(wiped)
	start = time.Now()
	wiped.start(t)
	c.waitReady(60*time.Second, wiped)
	t.Logf("wiped replica serving again after %v", time.Since(start).Round(time.Millisecond))
	if err := replicaHolds(css[1], want, "", "0"); err != nil {
		t.Fatalf("wiped replica: %v", err)
	}
	want["via-wiped"] = createWithRetry(t, css[1], "via-wiped")

	// All four replicas hold the same objects.
	poll.Until(t, "the four replicas to hold the same objects", func() error {
		for i, cs := range css {
			if err := replicaHolds(cs, want, "0"); err != nil {
				return fmt.Errorf("%s: %w", c.nodes[i].name, err)
			}
		}
		return nil
	})
}

// A follower judges a read-modify-write against its own store, which may
// lag a write the leader has just acknowledged: before answering 404 or
// 409 it catches up with the leader (ReadIndex) and looks again. Right
// after each acknowledged write on the leader, a follower updates the
// object, updates it pinned to its current resourceVersion, and deletes it
// with that resourceVersion as precondition: none may fail.
func TestHAProcessFollowerWritesAfterLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas")
	}
	c := startHACluster(t, 3)
	leader, _ := c.waitLeader(0, 20*time.Second)
	var follower *haNode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	lc, fc := c.client(leader), c.client(follower)
	for i := range 20 {
		name := fmt.Sprint("lag-", i)
		if _, err := lc.CoreV1().ConfigMaps(haNamespace).Create(t.Context(), registerCM(name, "a", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := fc.CoreV1().ConfigMaps(haNamespace).Update(t.Context(), registerCM(name, "b", ""), metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: update on the follower right after the create: %v", name, err)
		}
		cm, err := lc.CoreV1().ConfigMaps(haNamespace).Update(t.Context(), registerCM(name, "c", ""), metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fc.CoreV1().ConfigMaps(haNamespace).Update(t.Context(), registerCM(name, "d", cm.ResourceVersion), metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: update pinned to resourceVersion %s on the follower: %v", name, cm.ResourceVersion, err)
		}
		cm, err = lc.CoreV1().ConfigMaps(haNamespace).Update(t.Context(), registerCM(name, "e", ""), metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv := cm.ResourceVersion
		if err := fc.CoreV1().ConfigMaps(haNamespace).Delete(t.Context(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil {
			t.Fatalf("%s: delete with precondition resourceVersion %s on the follower: %v", name, rv, err)
		}
	}
}
