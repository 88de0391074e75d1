package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"k8s.io/client-go/rest"
)

// APIBase is the scheme and host of a kube API URL (a space's, or a
// replica's APIURL): MembersPath is served at the root of a replica's API,
// not under a space's path.
func APIBase(apiURL string) (string, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not an API URL", apiURL)
	}
	return u.Scheme + "://" + u.Host, nil
}

// GetMembers GETs MembersPath on base (APIBase) with rc's credentials,
// within rc.Timeout when it is set.
func GetMembers(ctx context.Context, rc *rest.Config, base string) (MemberList, error) {
	var ml MemberList
	c := rest.CopyConfig(rc)
	c.Host, c.APIPath = base, ""
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return ml, err
	}
	defer client.CloseIdleConnections()
	if rc.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rc.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+MembersPath, nil)
	if err != nil {
		return ml, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return ml, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ml, err
	}
	if resp.StatusCode != http.StatusOK {
		var st struct{ Message string }
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			return ml, fmt.Errorf("%s: %s", resp.Status, st.Message)
		}
		return ml, fmt.Errorf("%s (is this a Canopy root?)", resp.Status)
	}
	if err := json.Unmarshal(body, &ml); err != nil {
		return ml, fmt.Errorf("decoding the members: %w", err)
	}
	return ml, nil
}
