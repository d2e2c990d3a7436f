package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/fence"
	"github.com/zkrecipes/zkrecipes/resource/fencehttp"
)

// failing is a fence.Fence that refuses every write with err: the fence's
// errors that the real ones give only under faults (a lost answer).
type failing struct{ err error }

func (f failing) Admit(context.Context, string, fence.Token, func(context.Context) error) error {
	return f.err
}

// TestFenceErrors: the fence's errors become the documented answers, and
// no error text reaches the client.
func TestFenceErrors(t *testing.T) {
	const secret = "s3cr3t-zkr-fencehttp"
	cases := []struct {
		err    error
		status int
		code   string
		want   error
	}{
		{fmt.Errorf("%w: commit: connection reset (%s)", fence.ErrUncertain, secret), 500, "uncertain", fence.ErrUncertain},
		{fmt.Errorf("dial tcp: password %s refused", secret), 500, "internal", fencehttp.ErrRefused},
		{fmt.Errorf("%w: %s", fence.ErrBadResource, secret), 400, "bad-resource", fence.ErrBadResource},
		{&fence.StaleError{Resource: secret, Token: 3, Highest: 8}, 409, "stale", fence.ErrStale},
	}
	for _, c := range cases {
		srv := serve(t, failing{c.err}, func(http.ResponseWriter, *http.Request) {})
		resp, text, err := put(t, srv, "1", "", "3")
		if resp.StatusCode != c.status || resp.Header.Get(fencehttp.ErrorHeader) != c.code || !errors.Is(err, c.want) {
			t.Fatalf("%v: %d %q %v", c.err, resp.StatusCode, resp.Header.Get(fencehttp.ErrorHeader), err)
		}
		if strings.Contains(text, secret) || strings.Contains(fmt.Sprint(resp.Header), secret) || strings.Contains(err.Error(), secret) {
			t.Fatalf("the answer shows the fence's error: %q %v", text, resp.Header)
		}
	}
}

// TestTransport: the token header is set on a copy (the caller's request
// is unchanged, an earlier header replaced); a request of an ended lease
// is not sent.
func TestTransport(t *testing.T) {
	got := make(chan []string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Values(fencehttp.Header) }))
	defer srv.Close()
	l := &fixedLease{tok: 77, ctx: context.Background()}
	client := &http.Client{Transport: &fencehttp.Transport{Base: srv.Client().Transport, Lease: l}}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	req.Header.Set(fencehttp.Header, "5")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := <-got; len(v) != 1 || v[0] != "77" || req.Header.Get(fencehttp.Header) != "5" {
		t.Fatalf("sent %q, the caller's request now has %q", v, req.Header.Get(fencehttp.Header))
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("lease lost")
	cancel(cause)
	client.Transport.(*fencehttp.Transport).Lease = &fixedLease{tok: 78, ctx: ctx}
	_, err = client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if !errors.Is(err, fencehttp.ErrLeaseEnded) || !errors.Is(err, cause) {
		t.Fatalf("ended lease: %v", err)
	}
	select {
	case v := <-got:
		t.Fatalf("a request of an ended lease was sent: %q", v)
	default:
	}
}

type fixedLease struct {
	tok fence.Token
	ctx context.Context
}

func (l *fixedLease) Token() fence.Token       { return l.tok }
func (l *fixedLease) Context() context.Context { return l.ctx }

// TestCheckResponseHostile: a server's answers are input too: a 409 whose
// highest is not a token is still ErrStale (no StaleError), an unknown
// or huge code is ErrRefused and printed cut short, and a response
// without the header is the handler's (nil), whatever its status.
func TestCheckResponseHostile(t *testing.T) {
	huge := strings.Repeat("x", 10000)
	cases := []struct {
		hdr  map[string]string
		want error
	}{
		{map[string]string{fencehttp.ErrorHeader: "stale", fencehttp.HighestHeader: huge}, fence.ErrStale},
		{map[string]string{fencehttp.ErrorHeader: "stale", fencehttp.HighestHeader: "-1"}, fence.ErrStale},
		{map[string]string{fencehttp.ErrorHeader: huge}, fencehttp.ErrRefused},
		{map[string]string{}, nil},
	}
	for _, c := range cases {
		resp := &http.Response{StatusCode: 409, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
		for k, v := range c.hdr {
			resp.Header.Set(k, v)
		}
		err := fencehttp.CheckResponse(resp)
		var se *fence.StaleError
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) || errors.As(err, &se) || (err != nil && len(err.Error()) > 200) {
			t.Fatalf("%.40v: %.300v", c.hdr, err)
		}
	}
}
