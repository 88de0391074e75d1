package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/store"
)

// Lifetimes of ServiceAccount tokens. Like kube's TokenRequest, a request
// without expirationSeconds gets DefaultTokenTTL and one below MinTokenTTL
// is refused (ErrTokenTTL). A longer one than MaxTokenTTL is cut down to it,
// as kube-apiserver does with --service-account-max-token-expiration.
const (
	DefaultTokenTTL = time.Hour
	MinTokenTTL     = 10 * time.Minute
	MaxTokenTTL     = 48 * time.Hour
)

// tokenLeeway is the clock skew allowed on exp, nbf and iat, and the time a
// ServiceAccount may have been marked for deletion before its tokens stop
// working: go-jose's default leeway, which kube's validator uses.
const tokenLeeway = time.Minute

var serviceAccounts = store.Resource{Resource: "serviceaccounts"}

// serviceAccountClaims are the claims of a ServiceAccount token: kube's
// registered claims, and a private claim that binds the token to one
// ServiceAccount of one space.
type serviceAccountClaims struct {
	jwt.RegisteredClaims
	Canopy canopyClaim `json:"canopy.dev"`
}

// canopyClaim is shaped like kube's "kubernetes.io" claim, plus the space.
type canopyClaim struct {
	Space          string    `json:"space"`
	Namespace      string    `json:"namespace"`
	ServiceAccount objectRef `json:"serviceaccount"`
}

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// IssueServiceAccountToken signs a token for the ServiceAccount
// namespace/name, whose metadata.uid is uid, in space: what the TokenRequest
// subresource (kubectl create token) returns. Audiences default to the
// Issuer; only tokens whose audiences include the Issuer authenticate to this
// API. ttl 0 means DefaultTokenTTL; see MinTokenTTL and MaxTokenTTL. exp is
// the token's expiry, for the TokenRequest status.
func (a *Authenticator) IssueServiceAccountToken(space, namespace, name, uid string, audiences []string, ttl time.Duration) (token string, exp time.Time, err error) {
	if a.saKey == nil {
		return "", time.Time{}, errors.New("auth: no ServiceAccount signing key configured")
	}
	if namespace == "" || name == "" || uid == "" {
		return "", time.Time{}, errors.New("auth: a ServiceAccount token needs a namespace, a name and a uid")
	}
	switch {
	case ttl == 0:
		ttl = DefaultTokenTTL
	case ttl < MinTokenTTL:
		return "", time.Time{}, ErrTokenTTL
	case ttl > MaxTokenTTL:
		ttl = MaxTokenTTL
	}
	if len(audiences) == 0 {
		audiences = []string{a.issuer}
	}
	now := a.now().Truncate(time.Second)
	exp = now.Add(ttl)
	claims := serviceAccountClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    a.issuer,
			Subject:   serviceaccount.MakeUsername(namespace, name),
			Audience:  slices.Clone(audiences),
			ExpiresAt: jwt.NewNumericDate(exp),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        uuid.NewString(),
		},
		Canopy: canopyClaim{
			Space:          space,
			Namespace:      namespace,
			ServiceAccount: objectRef{Name: name, UID: uid},
		},
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["kid"] = a.keyID
	token, err = t.SignedString(a.saKey)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: signing ServiceAccount token: %w", err)
	}
	return token, exp, nil
}

// serviceAccountUser authenticates a ServiceAccount token presented to space.
func (a *Authenticator) serviceAccountUser(token, space string) (user.Info, error) {
	var c serviceAccountClaims
	_, err := jwt.ParseWithClaims(token, &c,
		func(*jwt.Token) (any, error) { return &a.saKey.PublicKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}),
		jwt.WithIssuer(a.issuer),
		jwt.WithAudience(a.issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(a.now),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: invalid bearer token: %w", ErrUnauthenticated, err)
	}
	p := c.Canopy
	ns, name := p.Namespace, p.ServiceAccount.Name
	switch {
	case p.Space != space:
		return nil, fmt.Errorf("%w: service account token was issued for space %q", ErrUnauthenticated, p.Space)
	case ns == "" || name == "" || c.Subject != serviceaccount.MakeUsername(ns, name):
		return nil, fmt.Errorf("%w: service account token names no service account", ErrUnauthenticated)
	}
	obj, err := a.st.Get(store.Key{Space: space, Resource: serviceAccounts, Namespace: ns, Name: name})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: service account %s/%s does not exist", ErrUnauthenticated, ns, name)
	case err != nil:
		return nil, fmt.Errorf("auth: looking up service account %s/%s: %w", ns, name, err)
	case obj.UID != p.ServiceAccount.UID:
		return nil, fmt.Errorf("%w: service account UID (%s) does not match claim (%s)", ErrUnauthenticated, obj.UID, p.ServiceAccount.UID)
	case deletedBefore(obj, a.now().Add(-tokenLeeway)):
		return nil, fmt.Errorf("%w: service account %s/%s has been deleted", ErrUnauthenticated, ns, name)
	}
	return &user.DefaultInfo{
		Name:   serviceaccount.MakeUsername(ns, name),
		UID:    obj.UID,
		Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated),
		Extra:  map[string][]string{user.CredentialIDKey: {"JTI=" + c.ID}},
	}, nil
}

// deletedBefore reports whether obj was marked for deletion before t. An
// object that cannot be decoded counts as deleted.
func deletedBefore(obj *store.Object, t time.Time) bool {
	var m struct {
		Metadata struct {
			DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj.Data, &m); err != nil {
		return true
	}
	ts := m.Metadata.DeletionTimestamp
	return ts != nil && ts.Time.Before(t)
}
