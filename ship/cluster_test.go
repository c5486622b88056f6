package ship

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmlab/cmlab/home"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// freePorts returns n ports free on 127.0.0.1 right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// TestShipR3ClusterLosesANode ships to an R3 stream on a three-node
// in-process cluster (the configuration docs/jetstream.md shows), shuts
// down the node the shipper is likely talking to while clients post, and
// checks that shipping goes on through the other two and that the stream
// still holds every event once, in order, and restores.
func TestShipR3ClusterLosesANode(t *testing.T) {
	ports := freePorts(t, 6)
	var routes []string
	for i := 0; i < 3; i++ {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
	}
	var nodes []*server.Server
	var urls []string
	for i := 0; i < 3; i++ {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[i],
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "cmlab", Host: "127.0.0.1", Port: ports[3+i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		nodes = append(nodes, s)
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	for _, s := range nodes {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("node not ready")
		}
	}
	h := home.Home{Dir: t.TempDir()}
	e := openEngine(t, h)
	defer e.Close()
	p := startPosters(e, 16, 2*time.Millisecond)
	conn := Conn{URL: strings.Join(urls, ",")}
	s, err := New(Options{Home: h, Conn: conn, Replicas: 3, Poll: 5 * time.Millisecond, Window: 128,
		AckTimeout: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// The meta leader is elected and the R3 stream created (retried by the
	// shipper until the cluster is formed).
	waitFor(t, "shipping to the cluster", func() bool { return s.State().Shipped > 300 })
	nodes[0].Shutdown()
	nodes[0].WaitForShutdown()
	shipped := s.State().Shipped
	waitFor(t, "shipping on two nodes", func() bool { return s.State().Shipped > shipped+300 })
	p.stop(t)
	last := e.Log().LastSeq()
	waitFor(t, "catching up", func() bool { return s.State().Shipped == last })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Losing a node may move the JetStream meta leader; until the two
	// nodes left have one, their API answers "no responders". Wait for
	// each node to answer a stream info before checking through it.
	for _, u := range urls[1:] {
		waitFor(t, "the stream's info from "+u, func() bool { return streamAnswers(u, s.State().Stream) })
	}
	n := &natsServer{t: t, port: ports[1]}
	info, err := n.stream(t, s.State().Stream).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream replicas %d, cluster %+v", info.Config.Replicas, info.Cluster)
	}
	checkStream(t, n, h, s.State().Stream)
	into := home.Home{Dir: filepath.Join(t.TempDir(), "restored")}
	if _, err := Restore(context.Background(), RestoreOptions{Conn: Conn{URL: urls[2]}, HomeID: s.HomeID(), Into: into, Key: homeKey(t, h)}); err != nil {
		t.Fatal(err)
	}
	e.Checkpoint()
	sameViews(t, h, into)
}

// streamAnswers reports whether the server at url answers an info
// request for stream.
func streamAnswers(url, stream string) bool {
	nc, err := Conn{URL: url}.connect("test")
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	_, err = st.Info(ctx)
	return err == nil
}
