package backing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// FieldManager is the server-side apply field manager of what Canopy
// writes into a backend.
const FieldManager = "canopy"

// Config configures a Controller.
type Config struct {
	Store  *store.Store
	Logger *slog.Logger
	// Probe is how often a mirror asks its backend whether it answers
	// (0: 2s).
	Probe time.Duration
	// Settle is how long a mirror gathers changes before it copies them
	// into the space (0: 20ms).
	Settle time.Duration
}

// Controller runs a mirror per backed space. It runs on the root's leader.
type Controller struct{ cfg Config }

// New returns a Controller.
func New(cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Probe <= 0 {
		cfg.Probe = 2 * time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 20 * time.Millisecond
	}
	return &Controller{cfg: cfg}
}

// running is a mirror and what it was started from.
type running struct {
	from   string
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs until ctx ends: it starts a mirror for every backed space
// that is not being deleted, and starts it again whenever what it reads
// its backend with (the record's backend and Secret reference, the
// Secret's version) changes.
func (c *Controller) Start(ctx context.Context) error {
	runs := map[string]*running{}
	defer func() {
		for _, r := range runs {
			r.cancel()
			<-r.done
		}
	}()
	for ctx.Err() == nil {
		rev, err := c.reconcile(ctx, runs)
		if err == nil {
			err = c.waitChange(ctx, rev)
		}
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("backed spaces: following space records", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// reconcile starts, restarts and stops mirrors to match the records, and
// returns the revision it read them at.
func (c *Controller) reconcile(ctx context.Context, runs map[string]*running) (int64, error) {
	st := c.cfg.Store
	rev := st.Revision()
	list, err := st.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return 0, err
	}
	want := map[string]string{}
	for _, rec := range list.Items {
		info := layout.ReadSpace(rec)
		if !info.Backed() || info.Deleting {
			continue
		}
		secretRev := int64(0)
		if o, err := st.Get(secretKey(info.Secret)); err == nil {
			secretRev = o.Revision
		}
		want[rec.Key.Name] = fmt.Sprintf("%s %+v %d", info.Backend, info.Secret, secretRev)
	}
	for name, r := range runs {
		if want[name] != r.from {
			r.cancel()
			<-r.done
			delete(runs, name)
		}
	}
	for name, from := range want {
		if runs[name] != nil {
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		r := &running{from: from, cancel: cancel, done: make(chan struct{})}
		runs[name] = r
		m := newMirror(c.cfg, name)
		go func() {
			defer close(r.done)
			m.run(mctx)
		}()
	}
	return rev, nil
}

// waitChange returns when a space record or a Secret of the system space
// changes after rev.
func (c *Controller) waitChange(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	records, err := c.cfg.Store.Watch(wctx, store.WatchOptions{Resource: layout.SpaceResource, Since: rev})
	if err != nil {
		return err
	}
	secrets, err := c.cfg.Store.Watch(wctx, store.WatchOptions{Space: layout.SystemSpace, Resource: secretsResource, Since: rev})
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-records.Events():
			if !ok {
				return records.Err()
			}
			if ev.Type != store.Bookmark && specChanged(ev) {
				return nil
			}
		case _, ok := <-secrets.Events():
			if !ok {
				return secrets.Err()
			}
			return nil
		}
	}
}

// specChanged reports whether a record event changes what a mirror is
// started from (a mirror writing the record's status does not).
func specChanged(ev store.Event) bool {
	if ev.Type != store.Modified || ev.Prev == nil {
		return true
	}
	return layout.ReadSpace(ev.Object) != layout.ReadSpace(ev.Prev)
}

var secretsResource = store.Resource{Resource: "secrets"}

func secretKey(ref layout.SecretRef) store.Key {
	return store.Key{Space: layout.SystemSpace, Resource: secretsResource, Namespace: ref.Namespace, Name: ref.Name}
}

// Reasons of a backed space's Ready condition.
const (
	ReasonReady          = "Ready"
	ReasonSecretNotFound = "SecretNotFound"
	ReasonBadKubeconfig  = "BadKubeconfig"
	ReasonForbidden      = "Forbidden"
	ReasonUnreachable    = "Unreachable"
	ReasonFailed         = "Failed"
)

// Conditions of a backed space's record.
const (
	ConditionReady     = "Ready"
	ConditionReachable = "Reachable"
)

// configError is a failure to build a client for the backend, with the
// Ready reason it shows as.
type configError struct {
	reason string
	err    error
}

func (e *configError) Error() string { return e.err.Error() }

// RESTConfig reads the kubeconfig that ref names from the system space of
// st. The error is a configError: SecretNotFound or BadKubeconfig.
func RESTConfig(st *store.Store, ref layout.SecretRef) (*rest.Config, error) {
	o, err := st.Get(secretKey(ref))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &configError{ReasonSecretNotFound, fmt.Errorf("no Secret %s/%s in the system space", ref.Namespace, ref.Name)}
	}
	if err != nil {
		return nil, err
	}
	var secret struct {
		Data map[string][]byte `json:"data"`
	}
	if err := json.Unmarshal(o.Data, &secret); err != nil {
		return nil, &configError{ReasonBadKubeconfig, fmt.Errorf("Secret %s/%s: %w", ref.Namespace, ref.Name, err)}
	}
	kc, ok := secret.Data[ref.Key]
	if !ok {
		return nil, &configError{ReasonBadKubeconfig, fmt.Errorf("Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)}
	}
	bad := func(err error) error {
		return &configError{ReasonBadKubeconfig, fmt.Errorf("Secret %s/%s, key %s: %w", ref.Namespace, ref.Name, ref.Key, err)}
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return nil, bad(err)
	}
	if err := inline(cfg); err != nil {
		return nil, bad(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return nil, bad(err)
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "canopy-root"
	return rc, nil
}

// inline refuses a kubeconfig whose current context reads a file or runs
// a command: the root would do so on its own machine for whoever may
// write Secrets in the system space.
func inline(cfg *clientcmdapi.Config) error {
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return fmt.Errorf("no current context %q", cfg.CurrentContext)
	}
	if c := cfg.Clusters[ctx.Cluster]; c != nil && c.CertificateAuthority != "" {
		return fmt.Errorf("cluster %s reads its CA from a file: give certificate-authority-data", ctx.Cluster)
	}
	a := cfg.AuthInfos[ctx.AuthInfo]
	switch {
	case a == nil:
	case a.Exec != nil || a.AuthProvider != nil:
		return fmt.Errorf("user %s runs a command or an auth provider: give a token or a client certificate inline", ctx.AuthInfo)
	case a.ClientCertificate != "" || a.ClientKey != "" || a.TokenFile != "":
		return fmt.Errorf("user %s reads its credentials from files: give client-certificate-data, client-key-data or token", ctx.AuthInfo)
	}
	return nil
}
