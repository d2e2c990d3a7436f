package k8stest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock/etcdtest"
	"github.com/zkrecipes/zkrecipes/backend/k8slease/internal/conntrack"
	"github.com/zkrecipes/zkrecipes/testkit/certtest"
	"github.com/zkrecipes/zkrecipes/testkit/serverkit"
)

// CachedBinary returns where scripts/kube-apiserver.sh puts the binary:
// $ZK_CACHE, else $XDG_CACHE_HOME/zkrecipes, else ~/.cache/zkrecipes, then
// kube-apiserver-<Version>/kube-apiserver. It does not check that it exists.
func CachedBinary() string {
	cache := os.Getenv("ZK_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = filepath.Join(os.Getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "zkrecipes")
	}
	return filepath.Join(cache, "kube-apiserver-"+Version, "kube-apiserver")
}

// binary is the kube-apiserver to run: KUBE_APISERVER, else CachedBinary.
func binary() (string, error) {
	if bin := strings.TrimSpace(os.Getenv(EnvBinary)); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s=%s: %v", EnvBinary, bin, err)
		}
		return bin, nil
	}
	bin := CachedBinary()
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no kube-apiserver binary: %s unset and %s missing", EnvBinary, bin)
	}
	return bin, nil
}

// launchLocal starts etcd, then a kube-apiserver over it, and returns when
// the API server is ready and its default namespace exists.
func launchLocal(ctx context.Context, o options) (*Cluster, error) {
	bin, err := binary()
	if err != nil {
		return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
	}
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	// etcd starts while the API server's keys are made: half a second
	// each, under the race detector.
	type launched struct {
		s   *etcdtest.Server
		err error
	}
	etcdc := make(chan launched, 1)
	go func() {
		s, err := etcdtest.Launch(ctx)
		etcdc <- launched{s, err}
	}()
	c := &Cluster{conns: conntrack.New(nil)}
	certs, err := c.writeFiles(bin)
	e := <-etcdc
	c.etcd = e.s
	if err == nil && e.err != nil {
		err = fmt.Errorf("etcd: %v", e.err)
	}
	if err == nil {
		err = c.startAPIServer(ctx, certs, o)
	}
	if err != nil {
		_ = c.Close()
		if errors.Is(outer.Err(), context.Canceled) { // interrupted: not a missing install
			return nil, fmt.Errorf("k8stest: start interrupted (%w): %v", outer.Err(), err)
		}
		return nil, fmt.Errorf("%w: %v; %s", ErrNoServer, err, InstallHint)
	}
	return c, nil
}

// writeFiles makes the API server's directory and writes its certificates,
// service-account key and token file there.
func (c *Cluster) writeFiles(bin string) (certtest.Files, error) {
	dir, err := os.MkdirTemp("", "k8stest-")
	if err != nil {
		return certtest.Files{}, err
	}
	c.api = &apiServer{bin: bin, dir: dir}
	certs, err := certtest.Generate(filepath.Join(dir, "pki"))
	if err != nil {
		return certtest.Files{}, err
	}
	if err := writeServiceAccountKey(filepath.Join(dir, "sa.key")); err != nil {
		return certtest.Files{}, err
	}
	c.tokens, err = writeTokens(filepath.Join(dir, "tokens.csv"))
	return certs, err
}

// startAPIServer starts the API server on a free port, retried on a fresh
// one when another process took it first.
func (c *Cluster) startAPIServer(ctx context.Context, certs certtest.Files, o options) error {
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		return err
	}
	etcdURLs := make([]string, 0, len(c.etcd.Endpoints()))
	for _, ep := range c.etcd.Endpoints() {
		etcdURLs = append(etcdURLs, "http://"+ep)
	}
	for attempt := 1; ; attempt++ {
		ports, err := serverkit.FreePorts(1)
		if err != nil {
			return err
		}
		c.api.port = ports[0]
		c.api.args = apiServerFlags(c.api.dir, certs, c.api.port, etcdURLs, o.flags)
		c.admin = &rest.Config{
			Host:            "https://127.0.0.1:" + strconv.Itoa(c.api.port),
			TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
			BearerToken:     c.tokens[AdminUser],
			Dial:            c.conns.Dial,
			QPS:             -1, // no client-side rate limit: tests measure the server
		}
		err = c.api.start(ctx, c.readyCheck())
		if err == nil {
			return nil
		}
		serverkit.ReleasePorts(c.api.port)
		if attempt == 5 || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			return err
		}
	}
}

// apiServerFlags is the kube-apiserver command line: one server on port of
// 127.0.0.1, TLS with the generated certificate, the token file, RBAC, its
// own key prefix in etcd (ETCD_TEST_ENDPOINTS may name a shared one), and
// extra last so that it wins.
func apiServerFlags(dir string, certs certtest.Files, port int, etcd []string, extra []string) []string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	saKey := filepath.Join(dir, "sa.key")
	args := []string{
		"--etcd-servers=" + strings.Join(etcd, ","),
		"--etcd-prefix=/k8stest-" + hex.EncodeToString(b[:]),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + certs.ServerCert, "--tls-private-key-file=" + certs.ServerKey,
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--profiling=false",
	}
	return append(args, extra...)
}

// writeTokens writes the token file (mode 0600) of the three users, each
// with a fresh random token, and returns the tokens by user.
func writeTokens(path string) (map[string]string, error) {
	tokens := make(map[string]string)
	var lines []string
	for i, user := range []string{AdminUser, User, OtherUser} {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		tok := "s3cr3t-zkr-k8s-" + hex.EncodeToString(b[:])
		tokens[user] = tok
		groups := ""
		if user == AdminUser {
			groups = `,"system:masters"`
		}
		lines = append(lines, fmt.Sprintf("%s,%s,uid-%d%s", tok, user, i, groups))
	}
	return tokens, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// writeServiceAccountKey writes a fresh P-256 key (ES256 tokens), which the
// API server requires to start even though the tests use no service account.
func writeServiceAccountKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	// SEC1 ("EC PRIVATE KEY"): the public-key flag reads no PKCS#8.
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// readyCheck returns the check of a started API server: /readyz answers
// 200 and the default namespace exists (the bootstrap controller creates it
// an instant after /readyz may already answer).
func (c *Cluster) readyCheck() func(ctx context.Context) error {
	return func(ctx context.Context) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.admin.TLSClientConfig.CAData)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
			if err := c.getOK(ctx, hc, path); err != nil {
				return err
			}
		}
		return nil
	}
}

// getOK asks path until it answers 200 or ctx ends. The error names the
// status, never the token.
func (c *Cluster) getOK(ctx context.Context, hc *http.Client, path string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.admin.Host+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.admin.BearerToken)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errPortTaken means the API server could not bind its port.
var errPortTaken = errors.New("k8stest: port already in use")

// apiServer is the kube-apiserver process of a local cluster.
type apiServer struct {
	bin, dir string
	port     int
	args     []string
	check    func(context.Context) error

	mu   sync.Mutex
	proc *process // nil while killed
}

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	log    *os.File
}

// start runs the binary and waits for check (kept for Restart) to pass.
func (a *apiServer) start(ctx context.Context, check func(context.Context) error) error {
	a.check = check
	logPath := filepath.Join(a.dir, "kube-apiserver.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := serverkit.StartChild(cmd); err != nil {
		_ = logf.Close()
		return err
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	wctx, stop := context.WithCancel(wctx)
	defer stop()
	go func() {
		select {
		case <-p.exited:
			stop()
		case <-wctx.Done():
		}
	}()
	if err := check(wctx); err != nil {
		p.kill()
		tail := logTail(logPath)
		if strings.Contains(tail, "address already in use") {
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		if p.cmd.ProcessState != nil && ctx.Err() == nil {
			err = fmt.Errorf("kube-apiserver exited: %v", p.cmd.ProcessState)
		}
		return fmt.Errorf("kube-apiserver on 127.0.0.1:%d: %v; log:\n%s", a.port, err, tail)
	}
	a.mu.Lock()
	a.proc = p
	a.mu.Unlock()
	return nil
}

// kill ends the process group (a stopped one too) and waits for the process.
func (p *process) kill() {
	_ = killGroup(p.cmd.Process.Pid)
	<-p.exited
	_ = p.log.Close()
}

// close kills the server and removes its directory.
func (a *apiServer) close() error {
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.mu.Unlock()
	if p != nil {
		p.kill()
	}
	serverkit.ReleasePorts(a.port)
	return os.RemoveAll(a.dir)
}

// logTail returns the end of the server's log, for error messages (the
// log holds no token: the server logs the token file's path only).
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
