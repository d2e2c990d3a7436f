package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/zkrecipes/zkrecipes/backend/k8slease/k8stest"
)

// TestK8sExecPlugin: a kubeconfig's exec credential plugin gets none of the
// secrets zkrecipes withholds from its command (PGPASSWORD, ZK_SERVERS,
// ZK_AUTH, PGSSLPASSWORD), and what it writes to stderr comes out as a log
// record, scrubbed of them, JSON with --log-format json.
func TestK8sExecPlugin(t *testing.T) {
	t.Parallel()
	c := k8stest.Shared(t)
	ns := k8stest.Namespace(t, c)
	dir := t.TempDir()
	const pgpw, auth, sslpw = "s3cr3t-zkr-pgpw-exec", "user:s3cr3t-zkr-auth-exec", "s3cr3t-zkr-ssl-exec"
	seen, secretFile := filepath.Join(dir, "plugin-env"), filepath.Join(dir, "pw")
	if err := os.WriteFile(secretFile, []byte(pgpw), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := c.Config()
	cred, err := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]string{"token": admin.BearerToken}})
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "plugin.sh")
	script := fmt.Sprintf("#!/bin/sh\nenv > %s\necho \"plugin: logging in, password $(cat %s)\" >&2\ncat <<'EOF'\n%s\nEOF\n", seen, secretFile, cred)
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(admin)
	cfg.BearerToken = ""
	cfg.ExecProvider = &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	env := []string{"ZK_SERVERS=k8s://", "PGPASSWORD=" + pgpw, "ZK_AUTH=" + auth, "PGSSLPASSWORD=" + sslpw}
	p := startEnv(t, env, dir, false, "lock", "--kubeconfig", kubeconfig(t, cfg), "--ttl", "3s", ns+"/exec", "--", "true")
	p.expect(0, 60*time.Second)
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("the plugin did not run: %v\n%s", err, p.stderr)
	}
	for _, s := range []string{pgpw, "s3cr3t-zkr-auth-exec", sslpw} {
		if strings.Contains(string(got), s) {
			t.Errorf("the plugin saw a withheld secret in its environment:\n%s", got)
		}
	}
	if !strings.Contains(string(got), "PATH=") {
		t.Errorf("the plugin did not get the rest of the environment:\n%s", got)
	}
	r := p.logged("kubeconfig exec plugin")
	if r == nil || !strings.Contains(fmt.Sprint(r["stderr"]), "plugin: logging in, password xxxxx") {
		t.Errorf("the plugin's stderr is not a scrubbed log record: %v\n%s", r, p.stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("a line of stderr is not JSON: %q", l)
		}
	}
	if strings.Contains(p.stderr.String()+p.stdout.String(), "s3cr3t-zkr-") {
		t.Errorf("a secret was printed:\n%s", p.stderr)
	}
}
