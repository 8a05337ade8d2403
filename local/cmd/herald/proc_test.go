package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
)

// herald builds this command once per test binary.
func herald(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herald-kill-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "herald")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// proc is one Herald process.
type proc struct {
	t    *testing.T
	name string
	bin  string
	env  []string
	base string // http://127.0.0.1:PORT

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

func newProc(t *testing.T, name, bin string, env []string) *proc {
	port := emulators.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := &proc{t: t, name: name, bin: bin, base: "http://" + addr,
		env: append(append(os.Environ(), env...), "HERALD_ADDR="+addr)}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s log:\n%s", p.name, p.log.String())
			p.mu.Unlock()
		}
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

// start runs the process and waits until it answers GET /health.
func (p *proc) start(ctx context.Context) {
	p.t.Helper()
	cmd := exec.Command(p.bin)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = lockedWriter{p}, lockedWriter{p}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(p.t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	fmt.Fprintf(&p.log, "--- started pid %d\n", cmd.Process.Pid)
	p.mu.Unlock()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/health", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			p.t.Fatalf("%s exited before answering /health", p.name)
		case <-ctx.Done():
			p.t.Fatalf("%s did not answer /health: %v", p.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// client is the test's HTTP client: every call is bounded.
var client = &http.Client{Timeout: 10 * time.Second}

// call sends a request with the token and decodes a JSON answer into out
// (when non-nil and the status is 2xx).
func call(ctx context.Context, base, method, path string, body any, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+killToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if out != nil && res.StatusCode/100 == 2 && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return res.StatusCode, nil
}
