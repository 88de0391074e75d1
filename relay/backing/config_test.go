package backing_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/backing"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// RESTConfig reads the Secret a Space names and refuses, naming what is
// wrong, a missing Secret or key, a kubeconfig that does not parse, and
// one that would read files or run commands on the root.
func TestRESTConfigRefusals(t *testing.T) {
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	const good = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: ""}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	put := func(name, key, kc string) {
		t.Helper()
		data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": layout.SystemSecretsNamespace}, "data": map[string][]byte{key: []byte(kc)}})
		if _, err := st.Txn(context.Background(), store.Op{Type: store.OpCreate, Data: data,
			Key: store.Key{Space: layout.SystemSpace, Resource: store.Resource{Resource: "secrets"}, Namespace: layout.SystemSecretsNamespace, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	put("good", "kubeconfig", good)
	put("other-key", "config", good)
	put("garbage", "kubeconfig", "{{")
	put("exec", "kubeconfig", strings.Replace(good, "{token: abc}", "{exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}", 1))
	put("files", "kubeconfig", strings.Replace(good, "{token: abc}", "{client-certificate: /etc/passwd, client-key: /etc/shadow}", 1))
	put("ca-file", "kubeconfig", strings.Replace(good, `certificate-authority-data: ""`, "certificate-authority: /etc/ssl/ca.pem", 1))

	ref := func(name string) layout.SecretRef {
		return layout.SecretRef{Namespace: layout.SystemSecretsNamespace, Name: name, Key: "kubeconfig"}
	}
	rc, err := backing.RESTConfig(st, ref("good"))
	if err != nil || rc.Host != "https://127.0.0.1:6443" || rc.BearerToken != "abc" {
		t.Fatalf("good: %+v, %v", rc, err)
	}
	for name, want := range map[string]string{
		"missing":   "no Secret canopy-system/missing",
		"other-key": `has no key "kubeconfig"`,
		"garbage":   "Secret canopy-system/garbage",
		"exec":      "runs a command",
		"files":     "reads its credentials from files",
		"ca-file":   "reads its CA from a file",
	} {
		_, err := backing.RESTConfig(st, ref(name))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, want)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a store error, not a reason", name)
		}
	}
}
