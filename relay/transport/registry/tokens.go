package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
)

// Token records: what the root keeps of each join token. They are
// Secrets in the inventory space, as kubeadm keeps bootstrap tokens, so
// that an admin lists and deletes them with kubectl too, under RBAC. The
// token itself is not in them (it is signed, not looked up): a record says
// that the token may still be used, and how often it was.
const (
	// TokenSpace and TokenNamespace hold the records.
	TokenSpace     = layout.InventorySpace
	TokenNamespace = "canopy-system"
	// TokenSecretType is the type of a record.
	TokenSecretType corev1.SecretType = "edge.canopy.dev/join-token"
	// tokenSecretPrefix starts a record's name; the token's ID follows.
	tokenSecretPrefix = "join-token-"
)

// Keys of a record's data. Everything but uses is a copy of the token's
// signed claims, for people: the root enforces the claims.
const (
	tokenKeyID      = "token-id"
	tokenKeyExpires = "expiration"
	tokenKeyRole    = "role"
	tokenKeyNames   = "names"
	tokenKeyMaxUses = "max-uses"
	tokenKeyRekey   = "rekey"
	tokenKeyUses    = "uses"
)

// TokenSecretName is the name of the record of the token with id.
func TokenSecretName(id string) string { return tokenSecretPrefix + id }

// TokenKey is the store key of the record of the token with id.
func TokenKey(id string) store.Key {
	return store.Key{Space: TokenSpace, Resource: store.Resource{Resource: "secrets"}, Namespace: TokenNamespace, Name: TokenSecretName(id)}
}

// TokenSecret returns the record of a token with claims, used by no one
// yet.
func TokenSecret(c pki.JoinClaims) *corev1.Secret {
	data := map[string][]byte{
		tokenKeyID:      []byte(c.ID),
		tokenKeyExpires: []byte(c.Expires.UTC().Format(time.RFC3339)),
		tokenKeyUses:    []byte("0"),
	}
	if c.Role != 0 {
		data[tokenKeyRole] = []byte(c.Role.String())
	}
	if len(c.Names) > 0 {
		data[tokenKeyNames] = []byte(strings.Join(c.Names, ","))
	}
	if c.MaxUses > 0 {
		data[tokenKeyMaxUses] = []byte(strconv.Itoa(c.MaxUses))
	}
	if c.Rekey {
		data[tokenKeyRekey] = []byte("true")
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: TokenSecretName(c.ID), Namespace: TokenNamespace},
		Type:       TokenSecretType,
		Data:       data,
	}
}

// TokenInfo is what a record says, for "relay token list".
type TokenInfo struct {
	ID      string
	Expires time.Time
	Role    string
	Names   []string
	MaxUses int
	Rekey   bool
	Uses    int
}

// ParseTokenSecret reads a record; ok is false for a Secret of another
// type.
func ParseTokenSecret(s *corev1.Secret) (info TokenInfo, ok bool, err error) {
	if s.Type != TokenSecretType {
		return TokenInfo{}, false, nil
	}
	d := s.Data
	info = TokenInfo{ID: string(d[tokenKeyID]), Role: string(d[tokenKeyRole]), Rekey: string(d[tokenKeyRekey]) == "true"}
	if n := string(d[tokenKeyNames]); n != "" {
		info.Names = strings.Split(n, ",")
	}
	if info.Expires, err = time.Parse(time.RFC3339, string(d[tokenKeyExpires])); err != nil {
		return info, true, fmt.Errorf("registry: token record %s: %s: %w", s.Name, tokenKeyExpires, err)
	}
	if info.MaxUses, err = atoi(d[tokenKeyMaxUses]); err != nil {
		return info, true, fmt.Errorf("registry: token record %s: %s: %w", s.Name, tokenKeyMaxUses, err)
	}
	if info.Uses, err = atoi(d[tokenKeyUses]); err != nil {
		return info, true, fmt.Errorf("registry: token record %s: %s: %w", s.Name, tokenKeyUses, err)
	}
	return info, true, nil
}

func atoi(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return strconv.Atoi(string(b))
}

// storedToken is a record as the store holds it: the Secret and the
// version it was read at.
type storedToken struct {
	secret *corev1.Secret
	obj    *store.Object
}

func readToken(r store.Reader, id string) (*storedToken, error) {
	o, err := r.Get(TokenKey(id))
	if err != nil {
		return nil, err
	}
	var s corev1.Secret
	if err := json.Unmarshal(o.Data, &s); err != nil {
		return nil, fmt.Errorf("registry: token record %s: %w", o.Key.Name, err)
	}
	return &storedToken{secret: &s, obj: o}, nil
}

// uses returns how often the token was used.
func (t *storedToken) uses() (int, error) {
	n, err := atoi(t.secret.Data[tokenKeyUses])
	if err != nil {
		return 0, fmt.Errorf("registry: token record %s: %s: %w", t.secret.Name, tokenKeyUses, err)
	}
	return n, nil
}

// withUses returns an update op of the record to n uses.
func (t *storedToken) withUses(n int) (store.Op, error) {
	s := t.secret.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[tokenKeyUses] = []byte(strconv.Itoa(n))
	data, err := json.Marshal(s)
	if err != nil {
		return store.Op{}, err
	}
	return store.Op{Type: store.OpUpdate, Key: t.obj.Key, Data: data, ExpectRevision: t.obj.Revision}, nil
}
