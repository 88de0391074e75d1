package link

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeAddr returns a loopback address where nothing listens, on UDP or TCP.
func freeAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	return addr
}

// A failed dial of several addresses, each tried over QUIC then TCP, is
// one line naming every attempt, and errors.Is still finds their causes.
func TestDialErrorOneLine(t *testing.T) {
	pki := newTestPKI(t)
	a, b := freeAddr(t), freeAddr(t)
	d := &Dialer{TLS: pki.client, IgnoreProxyEnv: true, QUICTimeout: 200 * time.Millisecond, Config: fastConfig()}
	_, err := d.Dial(testCtx(t, 20*time.Second), []string{a, b})
	if err == nil {
		t.Fatal("dial of two dead addresses worked")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("error spans lines: %q", msg)
	}
	for _, want := range []string{"link: dial: " + a + ": quic: ", "; tcp: ", "; " + b + ": quic: "} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not hold %q", msg, want)
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("errors.Is does not find the TCP refusal and the QUIC timeout in %q", msg)
	}
}

func TestJoinErrors(t *testing.T) {
	e1, e2 := errors.New("one\ntwo"), errors.New("three")
	err := JoinErrors(nil, e1, nil, e2)
	if got, want := err.Error(), "one; two; three"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if !errors.Is(err, e1) || !errors.Is(err, e2) {
		t.Fatal("errors.Is does not see the joined errors")
	}
	if JoinErrors(nil, nil) != nil {
		t.Fatal("nothing joined is not nil")
	}
}
