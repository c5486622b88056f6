package discovery

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/steps"
)

func newHome(t *testing.T) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLockAndStale: the lock is held for a daemon's life and seen from a
// second open (in this same process too); a record is live only with the
// lock held and its pid's start time and boot matching.
func TestLockAndStale(t *testing.T) {
	h := newHome(t)
	self, err := steps.ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if held, err := Held(h); err != nil || held {
		t.Fatalf("no lock file: held %v %v", held, err)
	}
	if why, _ := Stale(h, self); !strings.Contains(why, "no process holds state/daemon.lock") {
		t.Fatalf("unlocked: %q", why)
	}
	l, err := Acquire(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(h); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v", err)
	}
	if held, err := Held(h); err != nil || !held {
		t.Fatalf("held %v %v", held, err)
	}
	cases := []struct {
		p    steps.Process
		want string
	}{
		{self, ""},
		{steps.Process{Pid: self.Pid, Start: self.Start + 1, BootID: self.BootID}, "another process now"},
		{steps.Process{Pid: self.Pid, Start: self.Start, BootID: "00000000-0000-0000-0000-000000000000"}, "before the last reboot"},
		{steps.Process{Pid: self.Pid, Start: self.Start}, "no process start time and boot id"},
		{steps.Process{Pid: 1 << 30, Start: 5, BootID: self.BootID}, "does not run"},
	}
	for _, c := range cases {
		why, err := Stale(h, c.p)
		if err != nil || (c.want == "" && why != "") || (c.want != "" && !strings.Contains(why, c.want)) {
			t.Errorf("Stale(%+v) = %q, %v; want %q", c.p, why, err, c.want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if held, _ := Held(h); held {
		t.Fatal("held after Release")
	}
	if _, err := Acquire(h); err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
}

// TestDialChecksPeer: a client accepts the listener only with an allowed
// uid and the expected pid, and sends nothing otherwise.
func TestDialChecksPeer(t *testing.T) {
	h := newHome(t)
	ln, err := Listen(h)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			got <- string(b)
			c.Close()
		}
	}()
	ctx := context.Background()
	for _, w := range []Want{{Pid: os.Getpid() + 1, UIDs: []int{os.Geteuid()}}, {Pid: os.Getpid(), UIDs: []int{os.Geteuid() + 1}}} {
		if c, err := Dial(ctx, h.DaemonSocket(), w); !errors.Is(err, ErrPeer) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("Dial %+v: %v", w, err)
		}
	}
	c, err := Dial(ctx, h.DaemonSocket(), Want{Pid: os.Getpid(), UIDs: []int{os.Geteuid()}})
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.Close()
	for want := []string{"", "", "hello"}; len(want) > 0; want = want[1:] {
		select {
		case s := <-got:
			if s != want[0] {
				t.Fatalf("the listener read %q, want %q", s, want[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the listener read nothing")
		}
	}
	fi, err := os.Stat(h.DaemonSocket())
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket file: %v %v", fi.Mode(), err)
	}
}

// TestLongHomePath: a home deeper than a sockaddr_un holds still gets
// its socket (through /proc/self/fd), and Close removes it.
func TestLongHomePath(t *testing.T) {
	h := home.Home{Dir: filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60), "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(h)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), h.DaemonSocket(), Want{Pid: os.Getpid(), UIDs: []int{os.Geteuid()}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ln.Close()
	if _, err := os.Stat(h.DaemonSocket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
}

const envForeignDial = "CMLAB_TEST_DISCOVERY_FOREIGN"

func TestHelperForeignDial(t *testing.T) {
	path := os.Getenv(envForeignDial)
	if path == "" {
		t.Skip("child process of TestListenerRefusesOtherUsers")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		os.Stdout.WriteString("dial: " + err.Error())
		os.Exit(0)
	}
	c.Write([]byte("from 65534"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		os.Stdout.WriteString("closed")
	} else {
		os.Stdout.WriteString("read: " + err.Error())
	}
	os.Exit(0)
}

// TestListenerRefusesOtherUsers: a process of another uid that reaches the
// socket (here made reachable on purpose: state/ is 0700 in a real home)
// is closed at once and counted; it is never handed to the server.
func TestListenerRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as uid 65534 (SysProcAttr.Credential); run the tests as root to cover it")
	}
	base, err := os.MkdirTemp("", "cmlab-discovery-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	h := home.Home{Dir: filepath.Join(base, "home")}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{base, h.Dir, h.StateDir()} {
		os.Chmod(d, 0o755)
	}
	ln, err := Listen(h)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(h.DaemonSocket(), 0o666)
	refused := make(chan Cred, 4)
	accepted := make(chan net.Conn, 1)
	ln.OnRefused = func(c Cred) { refused <- c }
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	bin := filepath.Join(base, "discovery.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperForeignDial$", "-test.count=1")
	cmd.Env = append(os.Environ(), envForeignDial+"="+h.DaemonSocket())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil || string(out) != "closed" {
		t.Fatalf("uid 65534 on the socket: %q %v", out, err)
	}
	select {
	case c := <-accepted:
		t.Fatalf("the listener handed over a connection of %+v", c.(*Conn).Cred)
	default:
	}
	if c := <-refused; c.UID != 65534 || ln.Refused() != 1 || len(refused) != 0 {
		t.Fatalf("refused %d: %+v", ln.Refused(), c)
	}
}
