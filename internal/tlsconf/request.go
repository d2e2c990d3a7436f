package tlsconf

import (
	"crypto/tls"
	"sync/atomic"
)

// Request records, for one TLS handshake, whether the server asked for a
// client certificate and whether one was sent: what tells a server that
// refused us for want of a certificate from one that shares nothing with
// us, when both end the handshake with the same alert (a TLS 1.2
// handshake_failure, which OpenSSL sends for a missing certificate). The
// zero value is a handshake in which nothing was asked. Safe for
// concurrent use.
type Request struct{ asked, sent atomic.Bool }

// Asked reports whether the server asked for a client certificate.
func (r *Request) Asked() bool { return r != nil && r.asked.Load() }

// Sent reports whether a client certificate was sent (after Asked).
func (r *Request) Sent() bool { return r != nil && r.sent.Load() }

// Track returns a copy of cfg for one connection, whose
// GetClientCertificate records into the returned Request: it delegates to
// cfg's own GetClientCertificate, or picks from cfg.Certificates as
// crypto/tls does (the first the server's request supports, else none).
// A copy per connection keeps concurrent dials from sharing the record.
func Track(cfg *tls.Config) (*tls.Config, *Request) {
	r := &Request{}
	c := cfg.Clone()
	get, certs := cfg.GetClientCertificate, cfg.Certificates
	c.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		r.asked.Store(true)
		cert, err := pick(cri, get, certs)
		if err == nil && cert != nil && len(cert.Certificate) > 0 {
			r.sent.Store(true)
		}
		return cert, err
	}
	return c, r
}

// pick is crypto/tls's choice of a client certificate: get's, else the
// first of certs the request supports, else an empty one (none sent).
func pick(cri *tls.CertificateRequestInfo, get func(*tls.CertificateRequestInfo) (*tls.Certificate, error), certs []tls.Certificate) (*tls.Certificate, error) {
	if get != nil {
		return get(cri)
	}
	for i := range certs {
		if cri.SupportsCertificate(&certs[i]) == nil {
			return &certs[i], nil
		}
	}
	return new(tls.Certificate), nil
}
