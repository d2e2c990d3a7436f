package tlsconf

import (
	"crypto/tls"
	"testing"

	"github.com/zkrecipes/zkrecipes/testkit/certtest"
)

// Track records whether the server asked for a client certificate and
// whether one was sent, for a server that asks and one that does not, with
// and without certificates, and through the caller's own hook.
func TestTrack(t *testing.T) {
	f, err := certtest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	bare := full.Clone()
	bare.Certificates = nil
	hook := bare.Clone()
	hook.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &full.Certificates[0], nil }
	for _, c := range []struct {
		name        string
		ask         tls.ClientAuthType
		cfg         *tls.Config
		asked, sent bool
	}{
		{"not asked", tls.NoClientCert, full, false, false},
		{"asked, sent", tls.RequestClientCert, full, true, true},
		{"asked, none", tls.RequestClientCert, bare, true, false},
		{"asked, the caller's hook", tls.RequestClientCert, hook, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: c.ask})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if conn, err := ln.Accept(); err == nil {
					_ = conn.(*tls.Conn).Handshake()
					conn.Close()
				}
			}()
			cfg, req := Track(c.cfg)
			cfg.ServerName = "localhost"
			conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
			<-done
			if req.Asked() != c.asked || req.Sent() != c.sent {
				t.Fatalf("asked %v sent %v, want %v %v", req.Asked(), req.Sent(), c.asked, c.sent)
			}
		})
	}
	var none *Request
	if none.Asked() || none.Sent() {
		t.Fatal("a nil Request reports a request")
	}
}
