package link

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"testing"
	"time"
)

// testPKI is a CA with a server ("parent") and a client ("child") certificate.
type testPKI struct {
	server, client *tls.Config
}

var serverIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("127.0.1.1")}

func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			DNSNames:     []string{cn},
			IPAddresses:  ips,
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	return testPKI{
		server: &tls.Config{
			Certificates: []tls.Certificate{leaf(2, "parent", x509.ExtKeyUsageServerAuth, serverIPs)},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
		client: &tls.Config{
			Certificates: []tls.Certificate{leaf(3, "child", x509.ExtKeyUsageClientAuth, nil)},
			RootCAs:      pool,
		},
	}
}

// fastConfig has timers short enough for tests.
func fastConfig() Config {
	return Config{
		KeepAlivePeriod:  100 * time.Millisecond,
		MaxIdleTimeout:   600 * time.Millisecond,
		HandshakeTimeout: 2 * time.Second,
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// serveEcho accepts streams on c and echoes each back, recording kinds.
func serveEcho(ctx context.Context, c Conn, kinds chan<- StreamKind) {
	for {
		s, kind, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		if kinds != nil {
			select {
			case kinds <- kind:
			default:
			}
		}
		go echo(s)
	}
}

// echoStreams is a Conn.ServeStreams function that echoes every stream
// and sends its kind on kinds when there is room.
func echoStreams(kinds chan<- StreamKind) func(Stream, StreamKind) {
	return func(s Stream, kind StreamKind) {
		select {
		case kinds <- kind:
		default:
		}
		echo(s)
	}
}

// echo sends back what s receives, then closes it.
func echo(s Stream) {
	defer s.Close()
	_, _ = io.Copy(s, s)
	_ = s.CloseWrite()
}

// echoRoundTrip opens a stream of kind on c, sends data and checks it comes
// back intact.
func echoRoundTrip(t testing.TB, ctx context.Context, c Conn, kind StreamKind, data []byte) {
	t.Helper()
	s, err := c.OpenStream(ctx, kind)
	if err != nil {
		t.Fatalf("open %v: %v", kind, err)
	}
	defer s.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Write(data)
		if err == nil {
			err = s.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read %v: %v", kind, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write %v: %v", kind, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%v: echoed %d bytes, want %d identical", kind, len(got), len(data))
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
