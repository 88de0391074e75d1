package pki

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func testKubeconfigOptions(t *testing.T) KubeconfigOptions {
	t.Helper()
	ca, _ := newTestCA(t)
	return KubeconfigOptions{
		Server: "https://127.0.0.1:6443",
		CAPEM:  ca.CertPEM,
		Token:  "secret-token",
		Spaces: []string{"inventory", "default", "mailbox-region-a"},
	}
}

func TestKubeconfigRoundTrip(t *testing.T) {
	o := testKubeconfigOptions(t)
	cfg, err := BuildKubeconfig(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), AdminKubeconfigFile)
	if err := WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)

	loaded, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.CurrentContext != "default" {
		t.Errorf("current context %q, want default", loaded.CurrentContext)
	}
	if len(loaded.Contexts) != len(o.Spaces) {
		t.Errorf("%d contexts, want %d", len(loaded.Contexts), len(o.Spaces))
	}
	for _, space := range o.Spaces {
		rc, err := clientcmd.NewDefaultClientConfig(*loaded, &clientcmd.ConfigOverrides{CurrentContext: space}).ClientConfig()
		if err != nil {
			t.Fatalf("space %s: %v", space, err)
		}
		if want := "https://127.0.0.1:6443/spaces/" + space; rc.Host != want {
			t.Errorf("space %s: host %q, want %q", space, rc.Host, want)
		}
		if rc.BearerToken != o.Token {
			t.Errorf("space %s: token %q, want %q", space, rc.BearerToken, o.Token)
		}
		if !bytes.Equal(rc.CAData, o.CAPEM) {
			t.Errorf("space %s: CA data differs", space)
		}
	}
	if _, ok := loaded.AuthInfos["admin"]; !ok {
		t.Error("no user entry named admin")
	}
}

func TestBuildKubeconfigOptions(t *testing.T) {
	base := testKubeconfigOptions(t)
	o := base
	o.Server += "/"
	o.Spaces = []string{"inventory", "mailbox-a"}
	o.User = "root-admin"
	cfg, err := BuildKubeconfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "inventory" {
		t.Errorf("without default, current context %q, want the first space", cfg.CurrentContext)
	}
	if got := cfg.Clusters[ClusterName("mailbox-a")].Server; got != "https://127.0.0.1:6443/spaces/mailbox-a" {
		t.Errorf("server %q", got)
	}
	if cfg.Contexts["mailbox-a"].AuthInfo != "root-admin" {
		t.Error("context does not use the named user")
	}
	o.Current = "mailbox-a"
	if cfg, err = BuildKubeconfig(o); err != nil || cfg.CurrentContext != "mailbox-a" {
		t.Errorf("Current not honoured: %q, %v", cfg.CurrentContext, err)
	}

	for name, mutate := range map[string]func(*KubeconfigOptions){
		"http server":     func(o *KubeconfigOptions) { o.Server = "http://127.0.0.1:6443" },
		"no server":       func(o *KubeconfigOptions) { o.Server = "" },
		"no CA":           func(o *KubeconfigOptions) { o.CAPEM = nil },
		"no token":        func(o *KubeconfigOptions) { o.Token = "" },
		"no spaces":       func(o *KubeconfigOptions) { o.Spaces = nil },
		"slash in space":  func(o *KubeconfigOptions) { o.Spaces = []string{"a/b"} },
		"empty space":     func(o *KubeconfigOptions) { o.Spaces = []string{""} },
		"duplicate space": func(o *KubeconfigOptions) { o.Spaces = []string{"a", "a"} },
		"unknown current": func(o *KubeconfigOptions) { o.Current = "nope" },
	} {
		o := base
		mutate(&o)
		if _, err := BuildKubeconfig(o); err == nil {
			t.Errorf("%s: BuildKubeconfig succeeded", name)
		}
	}
}

func TestReadKubeconfigForSpace(t *testing.T) {
	o := testKubeconfigOptions(t)
	cfg, err := BuildKubeconfig(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), AdminKubeconfigFile)
	if err := WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}

	one, err := ReadKubeconfigForSpace(path, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Contexts) != 1 || len(one.Clusters) != 1 || len(one.AuthInfos) != 1 || one.CurrentContext != "inventory" {
		t.Fatalf("want only the inventory context, got contexts %v, current %q", one.Contexts, one.CurrentContext)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*one, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://127.0.0.1:6443/spaces/inventory"; rc.Host != want || rc.BearerToken != o.Token {
		t.Errorf("host %q token %q, want %q and the admin token", rc.Host, rc.BearerToken, want)
	}

	_, err = ReadKubeconfigForSpace(path, "nope")
	unknown, ok := errors.AsType[*UnknownSpaceError](err)
	if !ok {
		t.Fatalf("unknown space: error %v, want an *UnknownSpaceError", err)
	}
	if want := []string{"default", "inventory", "mailbox-region-a"}; unknown.Space != "nope" || !slices.Equal(unknown.Known, want) {
		t.Errorf("error names space %q and known %q, want nope and %q", unknown.Space, unknown.Known, want)
	}
	if want := `pki: no space "nope" in ` + path + ` (known spaces: default, inventory, mailbox-region-a)`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}

	if _, err := ReadKubeconfigForSpace(filepath.Join(t.TempDir(), "missing"), "default"); err == nil {
		t.Error("reading a missing kubeconfig succeeded")
	}

	derived, err := DeriveKubeconfigForSpace(path, "inventory", "reports-edge-9")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := clientcmd.NewDefaultClientConfig(*derived, nil).ClientConfig(); err != nil {
		t.Fatal(err)
	} else if want := "https://127.0.0.1:6443/spaces/reports-edge-9"; len(derived.Contexts) != 1 || len(derived.Clusters) != 1 ||
		derived.CurrentContext != "reports-edge-9" || rc.Host != want || rc.BearerToken != o.Token || len(rc.CAData) == 0 {
		t.Errorf("derived: contexts %v, current %q, host %q; want only reports-edge-9 at %s with the admin token and CA",
			derived.Contexts, derived.CurrentContext, rc.Host, want)
	}
	if _, err := DeriveKubeconfigForSpace(path, "inventory", "a/b"); err == nil {
		t.Error("derived a space whose name cannot be a URL path element")
	}
}
