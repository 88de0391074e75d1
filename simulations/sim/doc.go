// Package sim is Canopy's fleet simulator (issue 7, DESIGN.md section 8):
// it runs a whole tree of real relays in one process, acts on the root
// like a user, injects faults and measures what the design promises.
//
// # What it owns
//
// Run builds a fleet of the given topology ("1x10x50": a root, 10 regions,
// 50 edges under each): the root with server.Open (kube API on loopback
// HTTPS, Raft log on disk; for root-failover, 3 replicas with Raft and
// gossip over loopback TCP, sharing one PKI, each of the root's children
// given all three link addresses), every region and edge with server.OpenChild
// (in-memory stores), each edge with a virtual cluster
// (relay/apiserver/vcluster). Links are QUIC over one in-memory packet
// network (relay/transport/link/memnet: latency, loss, partitions, no sockets: the
// only way 10 000 edges fit under the open-file limit) or over loopback
// UDP, a socket per relay.
//
// It then acts through the root's kube API with client-go: one Location
// per group of edges, a namespace with ConfigMaps and a Deployment, and an
// EdgePlacement that puts them on every Location; the placement
// controller routes them down the tree. A scenario (rollout, churn,
// region-failure, partition, flaky-links, flat-vs-tree, status,
// root-failover) changes objects and breaks things; every write carries a version
// (VersionAnnotation). The status scenario places on a subset of the
// edges first, makes some virtual clusters refuse the workload
// (vcluster.Options.Reject through server.ChildConfig.RejectApply), and
// checks the root's CombinedStatuses count exactly after each status
// wave. Root-failover kills the leader replica (server.Root.Crash) while
// the user, whose requests go to one replica and move on to the next when
// it fails, keeps writing: the failover gap is kill → the next
// acknowledged write; the killed replica then restarts and must catch up.
//
// It measures, per destination and change, root write → arrival, where
// arrival is the version (or a later one) in the edge's inbox, or, once
// the edge syncer is wired (it writes applied records into the edge's
// store), applied to the virtual cluster; root write → reflected in the
// root's CombinedStatus (a StatusCollector counting destinations per
// version), when the edges evaluate collectors; bytes and messages per tier of
// links (session.ChildStatus), QUIC packet bytes (memnet), process CPU
// (getrusage) split by tier with pprof labels, memory (runtime/metrics,
// /proc/self/status), reconnects, and convergence: at the end every
// destination's inbox must hash as what its parent routes to it
// (tree.ContentHash = tree.RoutedContentHash), and the number of
// converged destinations is sampled over time.
//
// It reports a Summary (one JSON line for scripts) and, into a directory,
// report.md with PNG plots (gonum.org/v1/plot): latency CDF, bytes per
// tier, converged destinations over time.
//
// # What it must not do
//
// It does not change any relay's behaviour: it starts relays with their
// public configuration and reads their public counters (root-failover
// crashes a root replica through server.Root.Crash).
//
// # Concurrency
//
// Run is not reentrant in one process: it profiles the whole process.
// Inside, one goroutine per edge follows its store; the tracker and the
// fleet's counters are guarded by their own mutexes.
package sim
