package kubecluster

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/test/poll"
)

// Options selects what Start runs. The zero value is a full cluster with
// one fake Node.
type Options struct {
	// Minimal runs etcd and kube-apiserver only: enough for tests of the
	// API alone, and several times faster to start. Nothing schedules or
	// runs Pods, no controller acts (no default ServiceAccount, no garbage
	// collection), and Nodes is ignored.
	Minimal bool

	// Nodes is the number of fake Nodes kwok manages in a full cluster;
	// zero means 1. They are named kwok-node-0, kwok-node-1, …
	Nodes int

	// StartTimeout bounds Start; zero means 3 minutes.
	StartTimeout time.Duration

	// APIServerArgs are extra kube-apiserver flags (e.g.
	// "--feature-gates=…"), placed after the helper's own so they win.
	APIServerArgs []string

	// Durable makes etcd fsync its writes, as in production. Tests leave
	// it off (--unsafe-no-fsync: the data dies with the test); benchmarks
	// against a server that fsyncs every write set it. It applies to every
	// etcd member.
	Durable bool

	// EtcdMembers is the size of the etcd cluster kube-apiserver stores in;
	// zero means 1. With more than one, every member runs on 127.0.0.1 with
	// a client and a peer port and a directory of its own (etcd-0, etcd-1,
	// …), they form one cluster at start (--initial-cluster-state=new), and
	// kube-apiserver's --etcd-servers lists them all. Take an odd number,
	// as a production control plane does: a write then waits for a
	// majority of the members (of 3, the leader and one follower; each
	// fsyncs when Durable).
	EtcdMembers int
}

// Cluster is a running cluster. Its fields do not change after Start and its
// methods are safe for concurrent use; StopAPIServer and StartAPIServer
// replace the kube-apiserver process, not the cluster.
type Cluster struct {
	// Kubeconfig is the path of a kubeconfig file for the cluster admin
	// (a client certificate in group system:masters).
	Kubeconfig string
	// Host is the apiserver's URL, https://127.0.0.1:<port>.
	Host string
	// Dir holds the cluster's certificates, data and the output of each
	// process (<component>.log); it is removed with the test's TempDir.
	Dir string
	// Nodes are the names of the fake Nodes (none in a Minimal cluster).
	Nodes []string

	etcdURLs  []string // client URLs of the etcd members, in member order
	caPEM     []byte
	authority *ca // signs client certificates (UserKubeconfig)
	admin     keyPair
	apiBin    string   // the kube-apiserver binary...
	apiArgs   []string // ...and its flags, to start it again
	mu        sync.Mutex
	processes []*process // in start order
	stopped   bool       // Stop ran: nothing starts again
	stopOnce  sync.Once
}

// Annotation and value by which kwok (started with
// --manage-nodes-with-annotation-selector) knows the Nodes it plays.
const (
	fakeNodeAnnotation = "kwok.x-k8s.io/node"
	fakeNodeValue      = "fake"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// Start starts a cluster and returns once it serves requests: /readyz is ok
// and the default Namespace exists; in a full cluster also the default
// ServiceAccount, and every fake Node is Ready and schedulable. It fails the
// test (t.Fatal: call it from the test's goroutine) when a binary is missing
// or the cluster does not come up. Stop is registered with t.Cleanup; the
// tail of every process's output is logged there if the test failed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.EtcdMembers <= 0 {
		opts.EtcdMembers = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	bins := map[string]string{}
	names := []string{binEtcd, binAPIServer}
	if !opts.Minimal {
		names = append(names, binKCM, binScheduler, binKwok)
	}
	for _, name := range names {
		bins[name] = binary(t, name)
	}

	c := &Cluster{Dir: t.TempDir()}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			c.logOutput(t)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), opts.StartTimeout)
	defer cancel()
	began := time.Now()
	if err := c.start(ctx, opts, bins); err != nil {
		t.Fatalf("kubecluster: starting the cluster in %s: %v", c.Dir, err)
	}
	etcd := ""
	if opts.EtcdMembers > 1 {
		etcd = fmt.Sprintf(", %d etcd members", opts.EtcdMembers)
	}
	t.Logf("kubecluster: %s up in %v (minimal=%v, %d nodes%s)", c.Host, time.Since(began).Round(time.Millisecond), opts.Minimal, len(c.Nodes), etcd)
	return c
}

// RESTConfig returns a new admin client configuration for the cluster.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.caPEM,
			CertData: c.admin.certPEM,
			KeyData:  c.admin.keyPEM,
		},
		QPS:   100,
		Burst: 200,
	}
}

// Clientset returns an admin clientset for the cluster.
func (c *Cluster) Clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatalf("kubecluster: clientset: %v", err)
	}
	return cs
}

// UserKubeconfig writes a kubeconfig for user in groups, authenticated by
// a client certificate of the cluster's CA, into a new file in Dir and
// returns its path. The user may do what the cluster's RBAC grants it:
// nothing beyond discovery and self reviews until the test binds it a
// role (a group such as system:masters grants it all).
func (c *Cluster) UserKubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	kp, err := c.authority.client(user, groups...)
	if err != nil {
		t.Fatalf("kubecluster: a certificate for %s: %v", user, err)
	}
	b, err := clientcmd.Write(kubeconfig(c.Host, c.caPEM, user, kp))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(c.Dir, "user-*.kubeconfig")
	if err == nil {
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("kubecluster: writing the kubeconfig of %s: %v", user, err)
	}
	return f.Name()
}

// Stop kills every process of the cluster, last started first. It is
// idempotent and runs at the test's cleanup anyway.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		procs := c.processes
		c.stopped = true
		c.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].kill()
		}
	})
}

func (c *Cluster) logOutput(t testing.TB) {
	c.mu.Lock()
	procs := c.processes
	c.mu.Unlock()
	for _, p := range procs {
		t.Logf("kubecluster: output of %s (%s):\n%s", p.name, c.Dir, p.tail(logTailLines))
	}
}

// logTailLines is how much of each process's output a failed test logs.
const logTailLines = 150

// The fixed addresses of every cluster: they are never dialed, only
// written into objects and certificates.
const (
	serviceCIDR   = "10.96.0.0/16"
	podCIDR       = "10.244.0.0/16"
	saIssuer      = "https://kubernetes.default.svc.cluster.local"
	clusterName   = "kubecluster"
	loopback      = "127.0.0.1"
	kwokNodeLease = "40" // seconds; kwok renews the Node Leases every quarter of it
)

// files of a cluster's directory.
const (
	caCertFile      = "pki/ca.crt"
	caKeyFile       = "pki/ca.key"
	proxyCAFile     = "pki/front-proxy-ca.crt"
	proxyCertFile   = "pki/front-proxy-client.crt"
	proxyKeyFile    = "pki/front-proxy-client.key"
	servingCertFile = "pki/apiserver.crt"
	servingKeyFile  = "pki/apiserver.key"
	saKeyFile       = "pki/sa.key"
	saPubFile       = "pki/sa.pub"
	adminKubeconfig = "admin.kubeconfig"
	kcmKubeconfig   = "kube-controller-manager.kubeconfig"
	schedKubeconfig = "kube-scheduler.kubeconfig"
	kwokKubeconfig  = "kwok.kubeconfig"
	kwokConfigFile  = "kwok.yaml"
)

func (c *Cluster) start(ctx context.Context, opts Options, bins map[string]string) error {
	path := func(name string) string { return filepath.Join(c.Dir, name) }
	members := etcdMembers(opts.EtcdMembers)
	dirs := []string{"pki", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
	for _, m := range members {
		dirs = append(dirs, m.proc)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(path(d), 0o700); err != nil {
			return err
		}
	}
	// A client and a peer port per etcd member, then the apiserver's. The
	// controller manager's and the scheduler's are chosen when they start:
	// a port chosen seconds earlier may meanwhile be the local end of an
	// outgoing connection ("bind: address already in use", seen in CI).
	ports, err := freePorts(2*len(members) + 1)
	if err != nil {
		return err
	}
	for i := range members {
		members[i].client = "http://" + net.JoinHostPort(loopback, strconv.Itoa(ports[2*i]))
		members[i].peer = "http://" + net.JoinHostPort(loopback, strconv.Itoa(ports[2*i+1]))
		c.etcdURLs = append(c.etcdURLs, members[i].client)
	}
	ports = ports[2*len(members):]
	apiPort := ports[0]
	c.Host = "https://" + net.JoinHostPort(loopback, strconv.Itoa(apiPort))
	if err := c.writePKI(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}

	if err := c.startEtcd(ctx, opts, bins[binEtcd], members); err != nil {
		return err
	}

	apiArgs := []string{
		"--etcd-servers=" + strings.Join(c.etcdURLs, ","),
		"--bind-address=" + loopback,
		"--advertise-address=" + loopback,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + path("kube-apiserver"),
		"--tls-cert-file=" + path(servingCertFile),
		"--tls-private-key-file=" + path(servingKeyFile),
		"--client-ca-file=" + path(caCertFile),
		// The aggregation layer's front proxy, as kubeadm sets it up: the
		// controller manager and the scheduler look its CA up, and
		// aggregated API servers can be registered.
		"--requestheader-client-ca-file=" + path(proxyCAFile),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + path(proxyCertFile),
		"--proxy-client-key-file=" + path(proxyKeyFile),
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + path(saPubFile),
		"--service-account-signing-key-file=" + path(saKeyFile),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		// The "kubernetes" Service's Endpoints would point at a loopback
		// address, which validation rejects; nothing here needs them.
		"--endpoint-reconciler-type=none",
	}
	c.apiBin, c.apiArgs = bins[binAPIServer], append(apiArgs, opts.APIServerArgs...)
	if err := c.run(binAPIServer, c.apiBin, nil, c.apiArgs...); err != nil {
		return err
	}
	cs, err := c.probeClient()
	if err != nil {
		return err
	}
	if err := c.waitReady(ctx, cs); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "Namespace default", func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	if opts.Minimal {
		return nil
	}

	ports, err = freePorts(2)
	if err != nil {
		return err
	}
	kcmPort, schedPort := ports[0], ports[1]
	kcmURL := "https://" + net.JoinHostPort(loopback, strconv.Itoa(kcmPort))
	if err := c.run(binKCM, bins[binKCM], nil,
		"--kubeconfig="+path(kcmKubeconfig),
		"--authentication-kubeconfig="+path(kcmKubeconfig),
		"--authorization-kubeconfig="+path(kcmKubeconfig),
		"--bind-address="+loopback,
		"--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+path("kube-controller-manager"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+path(saKeyFile),
		"--root-ca-file="+path(caCertFile),
		"--cluster-signing-cert-file="+path(caCertFile),
		"--cluster-signing-key-file="+path(caKeyFile),
	); err != nil {
		return err
	}
	schedURL := "https://" + net.JoinHostPort(loopback, strconv.Itoa(schedPort))
	if err := c.run(binScheduler, bins[binScheduler], nil,
		"--kubeconfig="+path(schedKubeconfig),
		"--authentication-kubeconfig="+path(schedKubeconfig),
		"--authorization-kubeconfig="+path(schedKubeconfig),
		"--bind-address="+loopback,
		"--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+path("kube-scheduler"),
		"--leader-elect=false",
	); err != nil {
		return err
	}
	if err := c.run(binKwok, bins[binKwok],
		// kwok reads ~/.kwok/kwok.yaml when it exists: not the user's.
		[]string{"HOME=" + path("kwok")},
		"--kubeconfig="+path(kwokKubeconfig),
		"--config="+path(kwokConfigFile),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnotation+"="+fakeNodeValue,
		"--node-lease-duration-seconds="+kwokNodeLease,
		"--cidr="+podCIDR,
	); err != nil {
		return err
	}

	for i := range opts.Nodes {
		node := fakeNode(fmt.Sprintf("kwok-node-%d", i))
		if err := c.waitFor(ctx, "create Node "+node.Name, func(ctx context.Context) error {
			_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // an earlier try timed out after creating it
				return nil
			}
			return err
		}); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, node.Name)
	}

	insecure := insecureClient()
	if err := c.waitFor(ctx, "kube-controller-manager /healthz", func(ctx context.Context) error {
		return getOK(ctx, insecure, kcmURL+"/healthz")
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-scheduler /healthz", func(ctx context.Context) error {
		return getOK(ctx, insecure, schedURL+"/healthz")
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "ServiceAccount default/default", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	for _, name := range c.Nodes {
		if err := c.waitFor(ctx, "Node "+name+" Ready and schedulable", func(ctx context.Context) error {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return schedulable(n)
		}); err != nil {
			return err
		}
	}
	return nil
}

// probeClient is an admin clientset whose requests give up after 10 s,
// for the waits of Start and StartAPIServer.
func (c *Cluster) probeClient() (*kubernetes.Clientset, error) {
	cfg := c.RESTConfig()
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// waitReady waits until kube-apiserver's /readyz is ok.
func (c *Cluster) waitReady(ctx context.Context, cs *kubernetes.Clientset) error {
	return c.waitFor(ctx, "kube-apiserver /readyz", func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// StopAPIServer kills the cluster's kube-apiserver and waits for it to be
// gone; the rest of the cluster (etcd above all, and with it every object)
// keeps running, and clients of Host get their connections refused until
// StartAPIServer. Stopping a stopped apiserver does nothing.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	i := c.apiServerIndex()
	var p *process
	if i >= 0 {
		p = c.processes[i]
	}
	c.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// StartAPIServer starts the cluster's kube-apiserver again, with the flags
// and on the port it had (Host and the kubeconfigs stay valid), after
// StopAPIServer, and returns once its /readyz is ok, ctx ends or the
// process exits. Its output is appended to the same log file. Starting a
// running apiserver, or one of a stopped cluster, is an error.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if err := c.restartAPIServer(); err != nil {
		return err
	}
	cs, err := c.probeClient()
	if err != nil {
		return err
	}
	return c.waitReady(ctx, cs)
}

// restartAPIServer starts a stopped kube-apiserver in its old process's
// place (Stop kills it before etcd).
func (c *Cluster) restartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("kubecluster: the cluster was stopped")
	}
	i := c.apiServerIndex()
	if i < 0 {
		return errors.New("kubecluster: the cluster has no kube-apiserver to start again")
	}
	select {
	case <-c.processes[i].done:
	default:
		return errors.New("kubecluster: kube-apiserver is running; StopAPIServer first")
	}
	p, err := startProcess(filepath.Join(c.Dir, binAPIServer), binAPIServer, c.apiBin, c.apiArgs, nil)
	if err != nil {
		return err
	}
	c.processes[i] = p
	return nil
}

// apiServerIndex returns the index of the kube-apiserver in c.processes,
// -1 before it started; c.mu is held.
func (c *Cluster) apiServerIndex() int {
	return slices.IndexFunc(c.processes, func(p *process) bool { return p.name == binAPIServer })
}

// etcdMember is one member of a cluster's etcd.
type etcdMember struct {
	proc         string // the process's name and directory: etcd, or etcd-<i> of several
	name         string // etcd's --name
	client, peer string // URLs
}

// etcdMembers names n members; their URLs are left to fill in.
func etcdMembers(n int) []etcdMember {
	if n == 1 {
		return []etcdMember{{proc: binEtcd, name: clusterName}}
	}
	ms := make([]etcdMember, n)
	for i := range ms {
		ms[i] = etcdMember{proc: fmt.Sprintf("%s-%d", binEtcd, i), name: fmt.Sprintf("%s-%d", clusterName, i)}
	}
	return ms
}

// startEtcd starts every member, then waits until each reports healthy:
// etcd's /health is ok only once the cluster has a leader, so members of
// a cluster must all be started before any can be.
func (c *Cluster) startEtcd(ctx context.Context, opts Options, bin string, members []etcdMember) error {
	initial := make([]string, len(members))
	for i, m := range members {
		initial[i] = m.name + "=" + m.peer
	}
	// A token of this cluster's own, as etcd advises for several clusters
	// on one network: members of different clusters never take each other
	// for peers.
	token := clusterName + "-" + rand.Text()
	for _, m := range members {
		args := []string{
			"--name=" + m.name,
			"--data-dir=" + filepath.Join(c.Dir, m.proc, "data"),
			"--listen-client-urls=" + m.client,
			"--advertise-client-urls=" + m.client,
			"--listen-peer-urls=" + m.peer,
			"--initial-advertise-peer-urls=" + m.peer,
			"--initial-cluster=" + strings.Join(initial, ","),
			"--unsafe-no-fsync=" + strconv.FormatBool(!opts.Durable),
		}
		if len(members) > 1 {
			args = append(args, "--initial-cluster-state=new", "--initial-cluster-token="+token)
		}
		if err := c.run(m.proc, bin, nil, args...); err != nil {
			return err
		}
	}
	for _, m := range members {
		if err := c.waitFor(ctx, m.proc+" healthy", func(ctx context.Context) error { return getOK(ctx, nil, m.client+"/health") }); err != nil {
			return err
		}
	}
	return nil
}

// run starts a component and records it for Stop.
func (c *Cluster) run(name, bin string, env []string, args ...string) error {
	p, err := startProcess(filepath.Join(c.Dir, name), name, bin, args, env)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.processes = append(c.processes, p)
	c.mu.Unlock()
	return nil
}

// waitFor polls cond until it returns nil, a process of the cluster exits,
// or ctx ends; the error then names what was awaited and the last failure.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) error) error {
	timeout := poll.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	err := poll.Wait(ctx, func() error {
		c.mu.Lock()
		procs := c.processes
		c.mu.Unlock()
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return poll.Stop(err)
			}
		}
		return cond(ctx)
	}, poll.For(timeout), poll.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// writePKI writes the cluster's CA, the apiserver's serving certificate,
// the front proxy's CA and client certificate, the ServiceAccount signing key, kwok's configuration and a kubeconfig per
// client: the admin (group system:masters, also used by kwok, which plays
// kubelets and so needs their rights on Nodes and Pods), and the controller
// manager and the scheduler under the user names the bootstrap RBAC
// policy binds their roles to.
func (c *Cluster) writePKI() error {
	authority, err := newCA("kubecluster-ca")
	if err != nil {
		return err
	}
	serving, err := authority.serving("kube-apiserver",
		[]net.IP{net.ParseIP(loopback), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	proxyCA, err := newCA("kubecluster-front-proxy-ca")
	if err != nil {
		return err
	}
	proxyClient, err := proxyCA.client("front-proxy-client")
	if err != nil {
		return err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	c.caPEM, c.authority = authority.certPEM, authority
	files := map[string][]byte{
		caCertFile:      authority.certPEM,
		caKeyFile:       authority.keyPEM,
		servingCertFile: serving.certPEM,
		servingKeyFile:  serving.keyPEM,
		proxyCAFile:     proxyCA.certPEM,
		proxyCertFile:   proxyClient.certPEM,
		proxyKeyFile:    proxyClient.keyPEM,
		saKeyFile:       saKey,
		saPubFile:       saPub,
		kwokConfigFile:  kwokStages,
	}
	clients := []struct {
		file, user string
		groups     []string
	}{
		{adminKubeconfig, "kubecluster-admin", []string{"system:masters"}},
		{kwokKubeconfig, "kwok", []string{"system:masters"}},
		{kcmKubeconfig, "system:kube-controller-manager", nil},
		{schedKubeconfig, "system:kube-scheduler", nil},
	}
	for _, cl := range clients {
		kp, err := authority.client(cl.user, cl.groups...)
		if err != nil {
			return err
		}
		if cl.file == adminKubeconfig {
			c.admin = kp
		}
		kc, err := clientcmd.Write(kubeconfig(c.Host, authority.certPEM, cl.user, kp))
		if err != nil {
			return err
		}
		files[cl.file] = kc
	}
	if err := writeFiles(c.Dir, files); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, adminKubeconfig)
	return nil
}

// kubeconfig returns a self-contained kubeconfig for one client certificate.
func kubeconfig(host string, caPEM []byte, user string, kp keyPair) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			clusterName: {Server: host, CertificateAuthorityData: caPEM},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			user: {ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM},
		},
		Contexts: map[string]*clientcmdapi.Context{
			clusterName: {Cluster: clusterName, AuthInfo: user, Namespace: metav1.NamespaceDefault},
		},
		CurrentContext: clusterName,
	}
}

// fakeNode is a Node for kwok to play: it marks it Ready, keeps its Lease
// and runs the Pods scheduled to it.
func fakeNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{fakeNodeAnnotation: fakeNodeValue},
			Labels: map[string]string{
				"type":                          "kwok",
				corev1.LabelHostname:            name,
				corev1.LabelOSStable:            "linux",
				corev1.LabelArchStable:          "amd64",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
		},
	}
}

// schedulable returns nil once a Node is Ready and the node lifecycle
// controller has lifted the not-ready taint the apiserver puts on new Nodes.
func schedulable(n *corev1.Node) error {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return errors.New("not Ready")
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return fmt.Errorf("tainted %s", taint.Key)
		}
	}
	return nil
}

// PIDs returns the process IDs of the cluster's components (etcd members,
// kube-apiserver and the rest), in start order.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, 0, len(c.processes))
	for _, p := range c.processes {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}
