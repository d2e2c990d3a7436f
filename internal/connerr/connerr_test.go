package connerr

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/recipe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMark: the sentinel is added; the text and what errors.As finds stay.
func TestMark(t *testing.T) {
	base := &net.OpError{Op: "dial", Err: errors.New("refused")}
	err := Mark(fmt.Errorf("wrapped: %w", base), recipe.ErrUnreachable)
	var oe *net.OpError
	if !errors.Is(err, recipe.ErrUnreachable) || !errors.As(err, &oe) || err.Error() != "wrapped: dial: refused" {
		t.Errorf("Mark: %v", err)
	}
	if Mark(nil, recipe.ErrUnreachable) != nil {
		t.Error("Mark(nil) is not nil")
	}
}

// TestHandshake: each kind of TLS failure gets its sentinel, its text and
// whether a retry would meet it again; the backends' tests check the same
// against real servers.
func TestHandshake(t *testing.T) {
	alert := func(s string) error { return &net.OpError{Op: "remote error", Err: errors.New("tls: " + s)} }
	for _, c := range []struct {
		err         error
		kind        Kind
		perm, unr   bool
		final       bool
		certificate bool
	}{
		{&tls.CertificateVerificationError{Err: errors.New("x509")}, Untrusted, false, true, true, false},
		{alert("certificate required"), Refused, true, false, true, true},
		{alert("bad certificate"), Refused, true, false, true, true},
		{alert("protocol version not supported"), Ended, false, true, true, false},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, NotTLS, false, true, true, false},
		{io.EOF, Other, false, true, false, false},
		{errors.New("something else"), Other, false, false, false, false},
	} {
		got, final := Handshake(c.err, "h:1", &tls.Config{}, "is it the TLS port?")
		if k := KindOf(c.err); k != c.kind {
			t.Errorf("%v: kind %v, want %v", c.err, k, c.kind)
		}
		if errors.Is(got, recipe.ErrNoPermission) != c.perm || errors.Is(got, recipe.ErrUnreachable) != c.unr || final != c.final || !errors.Is(got, c.err) {
			t.Errorf("%v: %v (final %v)", c.err, got, final)
		}
		if c.certificate && got.Error() != "h:1 refused the client certificate (none was presented): "+c.err.Error() {
			t.Errorf("%v: %q", c.err, got)
		}
	}
}
