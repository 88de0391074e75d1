// Package kubecluster starts real Kubernetes clusters for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok, each a
// separate process, bound to 127.0.0.1 on free ports, with all state in the
// test's temporary directory; etcd is one member or, with
// Options.EtcdMembers, a cluster of several. kwok plays the kubelet for fake
// Nodes the helper creates, so Pods get scheduled and become Running without
// any container runtime.
//
// The binaries are the ones `make kube-bins` builds into the repository's
// bin/ from the versions pinned in hack/kube/go.mod. A missing binary fails
// the test with that hint; nothing is skipped. Kubectl finds the kubectl
// that tests run against a cluster or a relay ($KUBECTL, else PATH), and
// RunKubectl runs it with a kubeconfig and a HOME of the test's.
//
// Start returns once the cluster serves requests; Stop (also registered with
// t.Cleanup) kills every process. StopAPIServer and StartAPIServer take the
// kube-apiserver alone away and bring it back on its port, its data kept in
// etcd, for tests of what clients do while it is gone. UserKubeconfig issues
// a client certificate for any user and groups, for tests of RBAC. Each process's output goes to a file in the
// cluster's directory, and its tail is logged when the test fails. Several
// clusters may run at once, in one test or in parallel tests.
//
// The package owns processes, certificates and kubeconfigs; it must not fake
// any part of the API: tests that need a fake use their own.
package kubecluster
