package server

// Crash stops this root as abruptly as a process can stop itself from
// inside, the in-process stand-in for kill -9 that simulations and tests
// use for a replica: its Raft node stops at once (no leadership transfer,
// no leave: peers see its connections drop and elect a new leader after
// their heartbeat timeout), its store ends every watch and its kube API
// stops accepting, without draining requests in flight. Serve then returns
// (with the listener's error); it closes the links and the data directory
// lock as it returns. Crash is safe to call once Serve runs, and more than
// once.
func (r *Root) Crash() {
	if err := r.node.Close(); err != nil {
		r.log.Debug("crash: closing the log", "error", err)
	}
	r.store.Close()
	_ = r.ln.Close()
}
