package session

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/link"
)

// An uplink that reaches none of its parents reports one line naming
// each address it tried (it is logged as "parent unreachable, retrying").
func TestUplinkDialErrorOneLine(t *testing.T) {
	var addrs []string
	for range 2 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, pc.LocalAddr().String())
		_ = pc.Close()
	}
	u := NewUplink(UplinkConfig{Parents: addrs, Logger: quiet})
	d := &link.Dialer{TLS: &tls.Config{}, IgnoreProxyEnv: true, QUICTimeout: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := u.dial(ctx, d)
	if err == nil {
		t.Fatal("dial of dead parents worked")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("error spans lines: %q", msg)
	}
	for _, a := range addrs {
		if !strings.Contains(msg, a+": quic: ") {
			t.Fatalf("error %q does not name %s", msg, a)
		}
	}
}
