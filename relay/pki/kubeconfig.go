package pki

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigOptions describes a kubeconfig for the spaces of a root relay.
type KubeconfigOptions struct {
	// Server is the root's API endpoint, https://host:port.
	Server string
	// CAPEM is the PEM CA bundle that verifies the server.
	CAPEM []byte
	// Token is the bearer token presented to the server.
	Token string
	// Spaces get one cluster and one context each, in this order.
	Spaces []string
	// Current is the current context; empty means "default" if that is one
	// of Spaces, else the first space.
	Current string
	// User names the user entry; empty means "admin".
	User string
}

// ClusterName returns the kubeconfig cluster entry name of a space.
func ClusterName(space string) string { return "canopy-" + space }

// BuildKubeconfig returns a kubeconfig with, for each space S, a cluster
// ClusterName(S) whose server is o.Server+"/spaces/S" and a context named S
// that pairs it with the user o.User, who authenticates with o.Token.
func BuildKubeconfig(o KubeconfigOptions) (*clientcmdapi.Config, error) {
	u, err := url.Parse(o.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("pki: kubeconfig server %q is not an https://host:port URL", o.Server)
	}
	switch {
	case len(o.CAPEM) == 0:
		return nil, errors.New("pki: kubeconfig needs a CA bundle")
	case o.Token == "":
		return nil, errors.New("pki: kubeconfig needs a token")
	case len(o.Spaces) == 0:
		return nil, errors.New("pki: kubeconfig needs at least one space")
	}
	user := o.User
	if user == "" {
		user = "admin"
	}
	server := strings.TrimSuffix(o.Server, "/")

	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: o.Token}
	for _, space := range o.Spaces {
		if space == "" || url.PathEscape(space) != space {
			return nil, fmt.Errorf("pki: space name %q cannot be used in a URL path", space)
		}
		if _, dup := cfg.Contexts[space]; dup {
			return nil, fmt.Errorf("pki: space %q listed twice", space)
		}
		cfg.Clusters[ClusterName(space)] = &clientcmdapi.Cluster{
			Server:                   server + "/spaces/" + space,
			CertificateAuthorityData: o.CAPEM,
		}
		cfg.Contexts[space] = &clientcmdapi.Context{Cluster: ClusterName(space), AuthInfo: user}
	}

	cfg.CurrentContext = o.Current
	switch {
	case o.Current == "" && slices.Contains(o.Spaces, "default"):
		cfg.CurrentContext = "default"
	case o.Current == "":
		cfg.CurrentContext = o.Spaces[0]
	case !slices.Contains(o.Spaces, o.Current):
		return nil, fmt.Errorf("pki: current context %q is not one of the spaces %s", o.Current, strings.Join(o.Spaces, ", "))
	}
	return cfg, nil
}

// WriteKubeconfig writes cfg to path atomically, mode 0600.
func WriteKubeconfig(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("pki: encode kubeconfig: %w", err)
	}
	return writeFileAtomic(path, data, 0o600)
}

// UnknownSpaceError is returned by [ReadKubeconfigForSpace] when the
// kubeconfig has no context for the space.
type UnknownSpaceError struct {
	Space string
	Path  string
	// Known lists the spaces (contexts) that Path has, sorted.
	Known []string
}

func (e *UnknownSpaceError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("pki: no space %q in %s (known spaces: %s)", e.Space, e.Path, known)
}

// ReadKubeconfigForSpace reads the kubeconfig at path, typically an
// admin.kubeconfig, and returns a kubeconfig with only the context named
// space, its cluster and its user, with that context current. If there is
// no such context the error is an *[UnknownSpaceError].
func ReadKubeconfigForSpace(path, space string) (*clientcmdapi.Config, error) {
	all, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	ctx, ok := all.Contexts[space]
	if !ok {
		known := make([]string, 0, len(all.Contexts))
		for name := range all.Contexts {
			known = append(known, name)
		}
		slices.Sort(known)
		return nil, &UnknownSpaceError{Space: space, Path: path, Known: known}
	}
	cluster, ok := all.Clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("pki: %s: context %q refers to a missing cluster %q", path, space, ctx.Cluster)
	}
	user, ok := all.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("pki: %s: context %q refers to a missing user %q", path, space, ctx.AuthInfo)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ctx.Cluster] = cluster.DeepCopy()
	cfg.AuthInfos[ctx.AuthInfo] = user.DeepCopy()
	cfg.Contexts[space] = ctx.DeepCopy()
	cfg.CurrentContext = space
	return cfg, nil
}

// DeriveKubeconfigForSpace returns, like [ReadKubeconfigForSpace], a
// kubeconfig with the single context space, made from the context of
// another space (from) of the kubeconfig at path: same user and CA, the
// server URL's last path element /spaces/<from> replaced by
// /spaces/<space>. It is for spaces a root does not list in its admin
// kubeconfig (children beyond the first hundred); that the space exists is
// not checked.
func DeriveKubeconfigForSpace(path, from, space string) (*clientcmdapi.Config, error) {
	if space == "" || url.PathEscape(space) != space {
		return nil, fmt.Errorf("pki: space name %q cannot be used in a URL path", space)
	}
	return deriveKubeconfig(path, from, space, "/spaces/"+space)
}

// KubeconfigForDestination returns a kubeconfig whose single context,
// destination-<name>, reaches destination name's kube API through the
// root (/destinations/<name>), with the user and CA of the context of space
// from in the kubeconfig at path. That the destination exists is not
// checked.
func KubeconfigForDestination(path, from, name string) (*clientcmdapi.Config, error) {
	if name == "" || url.PathEscape(name) != name {
		return nil, fmt.Errorf("pki: destination name %q cannot be used in a URL path", name)
	}
	return deriveKubeconfig(path, from, "destination-"+name, "/destinations/"+name)
}

// deriveKubeconfig makes the context of space from, in the kubeconfig at
// path, the single context named name, at the root's URL followed by
// suffix.
func deriveKubeconfig(path, from, name, suffix string) (*clientcmdapi.Config, error) {
	cfg, err := ReadKubeconfigForSpace(path, from)
	if err != nil {
		return nil, err
	}
	ctx := cfg.Contexts[from]
	cluster := cfg.Clusters[ctx.Cluster]
	base, ok := strings.CutSuffix(cluster.Server, "/spaces/"+from)
	if !ok {
		return nil, fmt.Errorf("pki: %s: the server of context %q, %s, does not end in /spaces/%s", path, from, cluster.Server, from)
	}
	cluster.Server = base + suffix
	delete(cfg.Clusters, ctx.Cluster)
	delete(cfg.Contexts, from)
	ctx.Cluster = ClusterName(name)
	cfg.Clusters[ctx.Cluster] = cluster
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name
	return cfg, nil
}
