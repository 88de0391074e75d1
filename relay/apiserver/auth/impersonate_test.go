package auth

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/store"
)

func TestImpersonate(t *testing.T) {
	h := newHarness(t, store.Options{})
	impersonate := []string{"impersonate"}
	authn := []string{"authentication.k8s.io"}
	h.put("s1",
		makeClusterRole("impersonator", nil,
			rule(impersonate, core, []string{"users"}, "bob", "system:anonymous"),
			rule(impersonate, core, []string{"groups"}, "devs", "system:unauthenticated"),
			rule(impersonate, authn, []string{"userextras/scopes", "userextras/example.com/team"}),
			rule(impersonate, authn, []string{"uids"}, "1234"),
		),
		makeClusterRoleBinding("alice-impersonates", "impersonator", userSubject("alice")),
		makeRole("dev", "sa-impersonator", rule(impersonate, core, []string{"serviceaccounts"})),
		makeRoleBinding("dev", "alice-sa", "Role", "sa-impersonator", userSubject("alice")),
	)
	h.sync("s1")

	alice := person("alice")
	root := person("root", user.SystemPrivilegedGroup)
	header := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name      string
		space     string // default s1
		requester user.Info
		h         http.Header
		want      user.Info
		forbidden string // the 403 message, when refused
	}{
		{"user", "", alice, header("Impersonate-User", "bob"),
			&user.DefaultInfo{Name: "bob", Groups: []string{"system:authenticated"}}, ""},
		{"user and group", "", alice, header("Impersonate-User", "bob", "Impersonate-Group", "devs"),
			&user.DefaultInfo{Name: "bob", Groups: []string{"devs", "system:authenticated"}}, ""},
		{"user, extras and uid", "", alice, header(
			"Impersonate-User", "bob",
			"Impersonate-Extra-Scopes", "view",
			"Impersonate-Extra-Scopes", "edit",
			"Impersonate-Extra-Example.com%2fteam", "blue",
			"Impersonate-Uid", "1234"),
			&user.DefaultInfo{Name: "bob", UID: "1234", Groups: []string{"system:authenticated"},
				Extra: map[string][]string{"scopes": {"view", "edit"}, "example.com/team": {"blue"}}}, ""},
		{"service account", "", alice, header("Impersonate-User", "system:serviceaccount:dev:robot"),
			&user.DefaultInfo{Name: "system:serviceaccount:dev:robot",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:dev", "system:authenticated"}}, ""},
		{"service account with groups", "", alice, header("Impersonate-User", "system:serviceaccount:dev:robot", "Impersonate-Group", "devs"),
			&user.DefaultInfo{Name: "system:serviceaccount:dev:robot", Groups: []string{"devs", "system:authenticated"}}, ""},
		{"anonymous", "", alice, header("Impersonate-User", "system:anonymous"),
			&user.DefaultInfo{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, ""},
		{"unauthenticated group", "", alice, header("Impersonate-User", "bob", "Impersonate-Group", "system:unauthenticated"),
			&user.DefaultInfo{Name: "bob", Groups: []string{"system:unauthenticated"}}, ""},
		{"masters impersonate anyone", "", root, header("Impersonate-User", "carol", "Impersonate-Group", "system:masters"),
			&user.DefaultInfo{Name: "carol", Groups: []string{"system:masters", "system:authenticated"}}, ""},

		{"user refused", "", alice, header("Impersonate-User", "carol"), nil,
			`users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"group refused", "", alice, header("Impersonate-User", "bob", "Impersonate-Group", "devs", "Impersonate-Group", "system:masters"), nil,
			`groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope`},
		{"service account refused", "", alice, header("Impersonate-User", "system:serviceaccount:prod:robot"), nil,
			`serviceaccounts "robot" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "prod"`},
		{"extra refused", "", alice, header("Impersonate-User", "bob", "Impersonate-Extra-Reason", "because"), nil,
			`userextras.authentication.k8s.io "because" is forbidden: User "alice" cannot impersonate resource "userextras/reason" in API group "authentication.k8s.io" at the cluster scope`},
		{"uid refused", "", alice, header("Impersonate-User", "bob", "Impersonate-Uid", "42"), nil,
			`uids.authentication.k8s.io "42" is forbidden: User "alice" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope`},
		{"other space", "s2", alice, header("Impersonate-User", "bob"), nil,
			`users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			space := tt.space
			if space == "" {
				space = "s1"
			}
			got, err := h.az.Impersonate(context.Background(), space, tt.requester, tt.h)
			if tt.forbidden != "" {
				var status *apierrors.StatusError
				if !errors.As(err, &status) || !apierrors.IsForbidden(err) || status.ErrStatus.Message != tt.forbidden {
					t.Fatalf("got %v, %v\nwant 403 %s", got, err, tt.forbidden)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}

	t.Run("no headers", func(t *testing.T) {
		got, err := h.az.Impersonate(context.Background(), "s1", alice, header("Authorization", "Bearer x"))
		if err != nil || got != alice {
			t.Errorf("got %v, %v; want the requester", got, err)
		}
	})
	t.Run("groups without user", func(t *testing.T) {
		for _, hd := range []http.Header{
			header("Impersonate-Group", "devs"),
			header("Impersonate-Uid", "1234"),
			header("Impersonate-Extra-Scopes", "view"),
			header("Impersonate-User", "", "Impersonate-Group", "devs"),
		} {
			if _, err := h.az.Impersonate(context.Background(), "s1", root, hd); !apierrors.IsBadRequest(err) {
				t.Errorf("%v: got %v, want BadRequest", hd, err)
			}
		}
	})
}

func TestImpersonationRequests(t *testing.T) {
	h := http.Header{}
	h.Add("Impersonate-Uid", "u")
	h.Add("Impersonate-Extra-B", "2")
	h.Add("Impersonate-Extra-A%2Fx", "1")
	h.Add("Impersonate-Group", "g1")
	h.Add("Impersonate-Group", "g2")
	h.Add("Impersonate-User", "system:serviceaccount:ns:sa")
	reqs, err := impersonationRequests(h)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reqs {
		if r.Verb != "impersonate" || !r.ResourceRequest {
			t.Errorf("%+v is not an impersonate check", r)
		}
		got = append(got, r.APIGroup+"|"+r.Resource+"|"+r.Subresource+"|"+r.Namespace+"|"+r.Name)
	}
	want := []string{
		"|serviceaccounts||ns|sa",
		"|groups|||g1",
		"|groups|||g2",
		"authentication.k8s.io|userextras|a/x||1",
		"authentication.k8s.io|userextras|b||2",
		"authentication.k8s.io|uids|||u",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
