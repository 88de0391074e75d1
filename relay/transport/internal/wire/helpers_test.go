package wire

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// canon returns a deep copy of m with empty slices and maps set to nil, the
// form the decoder produces.
func canon(m Message) Message {
	v := reflect.New(reflect.TypeOf(m).Elem())
	v.Elem().Set(reflect.ValueOf(m).Elem())
	canonValue(v.Elem())
	return v.Interface().(Message)
}

func canonValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			canonValue(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		v.Set(c)
		for i := range c.Len() {
			canonValue(c.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}

// deploymentJSON returns a realistic Kubernetes object of exactly size bytes
// (size >= 600).
func deploymentJSON(name string, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":"shop-frontend",`+
		`"labels":{"app.kubernetes.io/name":%[1]q,"app.kubernetes.io/part-of":"checkout","tier":"web"},`+
		`"annotations":{"edge.canopy.dev/placement":"stores-eu","deployment.kubernetes.io/revision":"7"}},`+
		`"spec":{"replicas":3,"selector":{"matchLabels":{"app.kubernetes.io/name":%[1]q}},"template":{"metadata":{"labels":{"app.kubernetes.io/name":%[1]q}},`+
		`"spec":{"containers":[`, name)
	for i := 0; b.Len() < size-300; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","image":"registry.example.com/shop/%s:v1.%d.%d","ports":[{"containerPort":%d,"protocol":"TCP"}],`+
			`"env":[{"name":"STORE_ID","value":"store-%04d"},{"name":"LOG_LEVEL","value":"info"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}`,
			i, name, i, i*7%10, 8080+i, i*37)
	}
	b.WriteString(`]}}},"status":{"observedGeneration":7,"replicas":3,"readyReplicas":3,"pad":"`)
	for b.Len() < size-3 {
		b.WriteByte("abcdefghijklmnopqrstuvwxyz"[b.Len()%26])
	}
	b.WriteString(`"}}`)
	out := []byte(b.String())
	return out[:size]
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type sample struct {
	name string
	msg  Message
}

// samples covers every message type with realistic, empty and extreme
// values.
func samples() []sample {
	key := Key{Space: "mailbox-region-eu", Group: "apps", Resource: "deployments", Namespace: "shop-frontend", Name: "checkout-web"}
	uniKey := Key{Space: "wds-日本", Group: "", Resource: "configmaps", Namespace: "café", Name: "ключ-🌲"}
	small := deploymentJSON("checkout-web", 700)
	large := deploymentJSON("checkout-web", 64<<10)
	return []sample{
		{"hello/full", &Hello{Name: "edge-store-0042", Role: RoleEdge, Versions: []uint32{1, 2, math.MaxUint32}, Cursor: Cursor{Revision: 1234567, ReportSeq: 99, Epoch: "3f2a9c1e-epoch"}}},
		{"hello/empty", &Hello{}},
		{"hello/proof", &Hello{Name: "e", Role: RoleEdge, Versions: []uint32{3}, Proof: LinkProof{Time: 1700000000000000000, Signature: []byte{1, 2, 3}}}},
		{"hello/empty-versions", &Hello{Name: "r", Role: RoleRegion, Versions: []uint32{}}},
		{"welcome/resume", &Welcome{Name: "root-0", Version: 1, Epoch: "3f2a9c1e-epoch"}},
		{"welcome/resync", &Welcome{Name: "région-ü", Version: 1, Resync: true}},
		{"welcome/empty", &Welcome{}},
		{"join-request", &JoinRequest{Token: "cnp1.abcdef.0123456789", CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB...\n-----END CERTIFICATE REQUEST-----\n")}},
		{"join-request/empty", &JoinRequest{CSR: []byte{}}},
		{"join-response/ok", &JoinResponse{Chain: []byte("-----BEGIN CERTIFICATE-----\nleaf\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nintermediate\n-----END CERTIFICATE-----\n"), CA: []byte("-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n")}},
		{"join-response/error", &JoinResponse{Error: "join token expired at 2026-01-02T03:04:05Z"}},
		{"announce/full", &Announce{Generation: 17, Destinations: []Destination{
			{Name: "store-0042", Labels: map[string]string{"region": "eu", "tier": "store", "ünïcode": "✓", "": "empty-key"}, Path: []string{"region-eu", "edge-store-0042"}, Connected: true, LastSeen: 1767225600123456789, Since: 1767225500000000000},
			{Name: "store-0043", Path: []string{"region-eu", "sub-eu-1", "edge-store-0043"}, LastSeen: -1},
			{Name: "", Labels: map[string]string{}, Path: []string{}},
		}}},
		{"announce/empty", &Announce{}},
		{"announce/empty-list", &Announce{Generation: 1, Destinations: []Destination{}}},
		{"moved", &Moved{Destinations: []MovedDestination{{Name: "store-0042", Since: 1767225600123456789}, {Name: "ü"}}}},
		{"moved/empty", &Moved{}},
		{"siblings", &Siblings{Addrs: []string{"10.0.0.2:7443", "region-b.example.com:7443", "[fd00::1]:7443"}}},
		{"siblings/empty", &Siblings{}},
		{"announce-ack", &AnnounceAck{Generation: 3, Revision: 1 << 40}},
		{"announce-ack/zero", &AnnounceAck{}},
		{"register/join", &Register{ID: 7, Kind: RegisterJoin, Name: "e3", Role: RoleEdge, Path: []string{"root", "r1", "e3"}, PublicKey: []byte{1, 2}, Token: "cnp1.x.y"}},
		{"register/link", &Register{ID: 8, Kind: RegisterLink, Name: "e3", Role: RoleEdge, Path: []string{"root", "r1", "e3"}, PublicKey: []byte{3}, Proof: LinkProof{Time: 1 << 60, Signature: []byte{4, 5}}}},
		{"register/zero", &Register{}},
		{"registered", &Registered{ID: 7, Generation: 1 << 62}},
		{"registered/refused", &Registered{ID: 9, Code: CodePermissionDenied, Message: "name taken"}},
		{"renew", &Renew{ID: 1, CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB...\n-----END CERTIFICATE REQUEST-----\n")}},
		{"renew/zero", &Renew{}},
		{"renewed", &Renewed{ID: 1, Chain: []byte("-----BEGIN CERTIFICATE-----\nleaf\n-----END CERTIFICATE-----\n")}},
		{"renewed/refused", &Renewed{ID: math.MaxUint64, Code: CodePermissionDenied, Message: "not the key the relay joined with"}},
		{"error", &Error{Code: CodePermissionDenied, Message: "certificate names edge-a; mailbox-edge-b is not yours"}},
		{"error/unknown-code", &Error{Code: math.MaxUint32}},
		{"put/small", &Put{Revision: 42, Key: key, Data: small}},
		{"put/unicode-key", &Put{Revision: 1, Key: uniKey, Data: []byte(`{"data":{"ключ":"значение"}}`)}},
		{"put/empty", &Put{}},
		{"put/empty-data", &Put{Revision: 5, Key: key, Data: []byte{}}},
		{"put/large-compressible", &Put{Revision: math.MaxUint64, Key: key, Data: large}},
		{"put/large-random", &Put{Revision: 3, Key: key, Data: randomBytes(1, 200<<10)}},
		{"delete", &Delete{Revision: 43, Key: key}},
		{"delete/unicode", &Delete{Revision: 44, Key: uniKey}},
		{"delete/empty", &Delete{}},
		{"resync-begin", &ResyncBegin{Revision: 1000}},
		{"resync-end", &ResyncEnd{Revision: 1000}},
		{"progress", &Progress{Revision: 1 << 40}},
		{"ack", &Ack{Revision: 999}},
		{"ack/zero", &Ack{}},
		{"report", &Report{Seq: 12, Key: key, Data: small}},
		{"report/large", &Report{Seq: 13, Key: uniKey, Data: large}},
		{"report/deleted", &Report{Seq: 14, Key: key, Deleted: true}},
		{"report/empty", &Report{}},
		{"report-ack", &ReportAck{Seq: 14}},
		{"proxy-open", &ProxyOpen{Destination: "store-0042", ID: "9f1c", User: "alice@example.com", UID: "u-1",
			Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a", "b"}, "é": nil}}},
		{"proxy-open/zero", &ProxyOpen{}},
		{"proxy-ready", &ProxyReady{}},
		{"proxy-data", &ProxyData{Data: small}},
		{"proxy-data/large", &ProxyData{Data: randomBytes(2, 200<<10)}},
		{"proxy-data/empty", &ProxyData{}},
		{"proxy-credit", &ProxyCredit{Bytes: ProxyWindow}},
		{"proxy-close", &ProxyClose{}},
	}
}

// rawFrame builds a frame by hand.
func rawFrame(version byte, t Type, f Flags, payload []byte) []byte {
	b := []byte{version, byte(t), byte(f)}
	b = appendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

func mustMarshal(t testing.TB, m Message) []byte {
	t.Helper()
	b, err := Marshal(m)
	if err != nil {
		t.Fatalf("Marshal(%T): %v", m, err)
	}
	return b
}

func equalMessages(a, b Message) bool { return reflect.DeepEqual(canon(a), canon(b)) }
