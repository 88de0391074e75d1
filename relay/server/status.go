package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// serveStatus serves a child relay's status on addr until ctx is done:
// /metrics (its uplink and, for a region, its children's links),
// /healthz, /readyz (Child.ready), and /debug/inbox (object count, content
// hash and cursor of the inbox, and for a region the same of each child's
// mailbox: equal hashes mean a child holds exactly what its parent has for
// it).
func (c *Child) serveStatus(ctx context.Context, addr string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), c.uplink, childLinks{c})
	if c.syncer != nil {
		reg.MustRegister(c.syncer)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := c.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/debug/inbox", func(w http.ResponseWriter, _ *http.Request) {
		inbox, err := spaceSummary(c.store, layout.InboxSpace)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cursor, _ := c.uplink.Cursor()
		out := map[string]any{"objects": inbox.Objects, "hash": inbox.Hash, "cursor": cursor, "connected": c.uplink.Connected()}
		if d, mb := c.Downlink(), c.Mailboxes(); d != nil {
			mailboxes := map[string]contentSummary{}
			for _, child := range d.Children() {
				space := layout.MailboxSpace(child.Identity.Name)
				if mailboxes[space], err = mailboxSummary(c.store, layout.InboxSpace, mb.Routing(child.Identity.Name)); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
			}
			out["mailboxes"] = mailboxes
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	c.log.Info("status endpoint", "addr", ln.Addr().String())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ready is /readyz's check: a region is ready once it serves its
// children, an edge once it holds its certificate (it has joined). Neither
// needs its parent connected to be ready: it serves, or applies, from its
// store meanwhile.
func (c *Child) ready() error {
	if c.cfg.Role == pki.RoleRegion {
		select {
		case <-c.serving:
			return nil
		default:
			return errors.New("not serving its children yet")
		}
	}
	if _, _, err := pki.LoadChildIdentity(c.cfg.DataDir); err != nil {
		return errors.New("not joined yet")
	}
	return nil
}

// childLinks exposes a region's downlink metrics once it serves children.
type childLinks struct{ c *Child }

func (l childLinks) Describe(ch chan<- *prometheus.Desc) {}

func (l childLinks) Collect(ch chan<- prometheus.Metric) {
	if d := l.c.Downlink(); d != nil {
		d.Collect(ch)
	}
}

type contentSummary struct {
	Objects int    `json:"objects"`
	Hash    string `json:"hash"`
}

// mailboxSummary is the summary of a child's mailbox routed over space.
func mailboxSummary(st *store.Store, space string, rt tree.Routing) (contentSummary, error) {
	objs, err := tree.RoutedObjects(st, space, rt)
	if err != nil {
		return contentSummary{}, err
	}
	hash, err := tree.HashObjects(objs)
	return contentSummary{Objects: len(objs), Hash: hash}, err
}

func spaceSummary(st *store.Store, space string) (contentSummary, error) {
	hash, err := tree.ContentHash(st, space)
	if err != nil {
		return contentSummary{}, err
	}
	list, err := st.List(store.ListOptions{Space: space})
	if err != nil {
		return contentSummary{}, err
	}
	return contentSummary{Objects: len(list.Items), Hash: hash}, nil
}
