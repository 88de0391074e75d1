package kubeapi

import (
	"net/http/httptest"
	"testing"
)

func TestOutputForm(t *testing.T) {
	cases := []struct {
		accept string
		want   outputForm
	}{
		{"", formObject},
		{"application/json", formObject},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", formTable},
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io", formTable},
		{"application/json;as=Table;v=v9;g=meta.k8s.io,application/json", formObject},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", formPartial},
		{"application/vnd.kubernetes.protobuf,application/json", formObject},
		{"*/*", formObject},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		r.Header.Set("Accept", c.accept)
		rq := &request{r: r}
		if got := rq.outputForm(); got != c.want {
			t.Errorf("Accept %q: form %d, want %d", c.accept, got, c.want)
		}
	}
}

func TestWantsAggregated(t *testing.T) {
	cases := []struct {
		accept string
		want   bool
	}{
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", true},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", false},
		{"application/json, */*", false},
		{"", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/apis", nil)
		r.Header.Set("Accept", c.accept)
		if got := wantsAggregated(r); got != c.want {
			t.Errorf("Accept %q: aggregated %v, want %v", c.accept, got, c.want)
		}
	}
}

func TestContinueToken(t *testing.T) {
	tok := encodeContinue(42, "default/cm-7")
	got, err := decodeContinue(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 42 || got.After != "default/cm-7" {
		t.Fatalf("round trip: %+v", got)
	}
	for _, bad := range []string{"!!!", "e30", "eyJ2IjoieCJ9"} {
		if _, err := decodeContinue(bad); err == nil {
			t.Errorf("decodeContinue(%q) accepted a bad token", bad)
		}
	}
}
