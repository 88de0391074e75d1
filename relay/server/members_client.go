package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	resp, done, err := getPath(ctx, rc, base, MembersPath)
	if err != nil {
		return ml, err
	}
	defer done()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ml, err
	}
	if err := json.Unmarshal(body, &ml); err != nil {
		return ml, fmt.Errorf("decoding the members: %w", err)
	}
	return ml, nil
}
