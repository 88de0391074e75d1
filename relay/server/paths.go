package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/layout"
)

// The root serves a few paths of its own beside the kube API
// (MembersPath, BackupPath). Each needs an authenticated user allowed to
// get it as a non-resource URL in the default space, as /metrics does.

// authorizePath authenticates req and checks that its user may get path;
// if not, it answers with the kube Status saying why and returns false.
func (r *Root) authorizePath(w http.ResponseWriter, req *http.Request, path string) bool {
	u, err := r.authn.Authenticate(req, layout.DefaultSpace)
	if err != nil {
		writeStatusError(w, apierrors.NewUnauthorized("Unauthorized"))
		return false
	}
	attrs := authorizer.AttributesRecord{User: u, Verb: "get", Path: path}
	if dec, reason, _ := r.authz.Authorize(req.Context(), layout.DefaultSpace, attrs); dec != authorizer.DecisionAllow {
		writeStatusError(w, auth.NewForbidden(u, attrs, reason))
		return false
	}
	return true
}

// nonResource names what a Status about one of these paths is about.
func nonResource(name string) schema.GroupResource {
	return metav1.SchemeGroupVersion.WithResource(name).GroupResource()
}

func writeStatusError(w http.ResponseWriter, err *apierrors.StatusError) {
	writeStatusJSON(w, int(err.ErrStatus.Code), &err.ErrStatus)
}

// getPath GETs path on base (APIBase) with rc's credentials, bounded by
// rc.Timeout when it is set. A response other than 200 is an error
// carrying its Status message. done releases the response and the client.
func getPath(ctx context.Context, rc *rest.Config, base, path string) (resp *http.Response, done func(), err error) {
	c := rest.CopyConfig(rc)
	c.Host, c.APIPath = base, ""
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, err
	}
	cancel := context.CancelFunc(func() {})
	if rc.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, rc.Timeout)
	}
	done = func() {
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		client.CloseIdleConnections()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err == nil {
		resp, err = client.Do(req)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer done()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var st struct{ Message string }
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			return nil, nil, fmt.Errorf("%s: %s", resp.Status, st.Message)
		}
		return nil, nil, fmt.Errorf("%s (is this a Canopy root?)", resp.Status)
	}
	return resp, done, nil
}
