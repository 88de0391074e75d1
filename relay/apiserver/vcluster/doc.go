// Package vcluster is an in-memory Kubernetes cluster with a simulated
// control plane and kubelet, for edge relays started with --virtual-cluster
// and for simulations (DESIGN.md section 8, package simulations/sim).
//
// # What it owns
//
// A Cluster is Canopy's own kube API server (package relay/apiserver/kubeapi) over a
// private in-memory store (package relay/store), served without sockets by
// InprocTransport: RESTConfig returns a rest.Config whose Transport calls
// the server's handler in-process, so client-go (typed clients, dynamic
// client, discovery, RESTMappers, informers and watches) works unchanged
// and a syncer takes the same code path as against a real cluster.
//
// Start runs, until its context ends:
//
//   - the API server's lifecycle controllers (namespace deletion, garbage
//     collection through ownerReferences);
//   - one loop that is the whole simulated control plane: Deployment (one
//     ReplicaSet per pod template, pod-template-hash), ReplicaSet,
//     StatefulSet, DaemonSet (a pod per node) and Job controllers, a
//     round-robin scheduler and the kubelets of all nodes, which make a
//     pod Running and Ready (or Succeeded, when it does not restart)
//     Options.ReadyDelay after first seeing it, or fail it for a
//     deterministic Options.FailureRate share of pods.
//
// That loop reads the store directly through one store watch over the
// cluster (the store is both its etcd and its watch cache, so nothing is
// cached twice), and writes through the API with client-go, so its writes
// get the server's semantics. Pods waiting for ReadyDelay sit in one timer
// heap behind one time.Timer. A started cluster runs five goroutines: two
// for the lifecycle controllers, one for the simulated control plane and
// one store watcher for each of the two loops; every open client watch
// adds one (its handler).
//
// The simulated kubelet also answers the pods' connect subresources
// (kubeapi.Config.Connect, kubelet_streams.go) so that kubectl logs, exec,
// attach, port-forward and proxy work as against a real cluster:
//
//   - a container's log (container.go) is a function of its status: a
//     few start lines naming pod, container, node, image and ports, then
//     a heartbeat line every Options.LogInterval while it runs;
//   - exec runs a few simulated commands (echo, hostname, env, cat
//     /etc/hostname, date, true, false, sleep, stty size, sh and bash,
//     interactive on a terminal); anything else is "command not found",
//     exit status 127; attach streams the log from then on;
//   - every container port a pod declares is a tiny HTTP server
//     (portserver.go) that port-forward and pods/proxy reach, and
//     services/proxy through a Ready pod the service selects.
//
// Streams are served with the kubelet's own libraries
// (k8s.io/cri-streaming: SPDY and WebSocket v4) and, for what
// kube-apiserver translates (WebSocket v5 exec and attach, WebSocket
// tunneling of port-forward), k8s.io/apiserver's proxy handlers toward
// that kubelet side through in-process pipes (net.Pipe served by an
// http.Server for the life of one connection). Nothing listens and nothing
// is kept per pod: a stream reads its pod when it opens, and its
// goroutines end when it closes. Streams that upgrade (exec, attach,
// port-forward) work over Handler on a real listener and over
// InprocTransport, whose 101 responses carry the connection
// (httputil.ReverseProxy passes them on).
//
// # What it must not do
//
// It must not change relay/apiserver/kubeapi or relay/store to suit
// itself: it is a client of them, as the root relay is
// (kubeapi.Config.Connect is a hook any server may set, as kube-apiserver
// hands the same requests to kubelets). It does not simulate networking,
// volumes, probes, node heartbeats or leases, ControllerRevisions, events,
// CronJobs, rollout progress deadlines, minReadySeconds or Job retry
// back-off.
package vcluster
