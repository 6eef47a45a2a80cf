package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
)

// Users of the secured test cluster, one per mechanism. The passwords are
// distinctive so that a leak into an error message cannot go unnoticed.
var secUsers = []struct{ mech, user, pass string }{
	{"SCRAM-SHA-256", "alice256", "pw-Sh4-256-do-not-leak"},
	{"SCRAM-SHA-512", "bob512", "pw-Sh4-512-do-not-leak"},
	{"PLAIN", "carol", "pw-pl41n-do-not-leak"},
}

const (
	secPartitions = 2
	secPerPart    = 40 // records seeded per partition, one a minute from t0
	wrongPassword = "pw-WR0NG-do-not-leak"
)

// secrets lists every password used in these tests.
func secrets() []string {
	out := []string{wrongPassword}
	for _, u := range secUsers {
		out = append(out, u.pass)
	}
	return out
}

// noSecret fails when err or any string in more mentions a password.
func noSecret(t *testing.T, err error, more ...string) {
	t.Helper()
	texts := slices.Clone(more)
	if err != nil {
		texts = append(texts, err.Error())
	}
	for _, s := range texts {
		for _, pw := range secrets() {
			if strings.Contains(s, pw) {
				t.Errorf("a password leaked into %q", s)
			}
		}
	}
}

// testPKI is a test CA with a server certificate for 127.0.0.1/localhost and
// a client certificate, written as PEM files to a temporary directory.
type testPKI struct {
	dir                   string
	caFile                string
	clientCert, clientKey string
	serverCert            tls.Certificate
	pool                  *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert := newCA(t, "replay test CA")
	pki := &testPKI{dir: dir, pool: x509.NewCertPool()}
	pki.pool.AddCert(caCert)
	pki.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)

	srvKey, srvDER := leafCert(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kfake"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	pki.serverCert = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}

	cliKey, cliDER := leafCert(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "replay"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	pki.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	der, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	pki.clientKey = writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", der)
	return pki
}

// serverTLS is the broker's TLS config; with mTLS it requires a client
// certificate signed by the test CA.
func (p *testPKI) serverTLS(mTLS bool) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}
	if mTLS {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = p.pool
	}
	return cfg
}

// otherCAFile writes a CA that signed nothing the broker presents.
func otherCAFile(t *testing.T) string {
	_, ca := newCA(t, "some other CA")
	return writePEM(t, t.TempDir(), "other-ca.pem", "CERTIFICATE", ca.Raw)
}

func newCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func leafCert(t *testing.T, caKey *ecdsa.PrivateKey, ca, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newSecureCluster starts kfake with SASL on, the users of secUsers, and TLS
// when serverTLS is set, and seeds topic orders with secPerPart records per
// partition, record i of each partition at t0 + i minutes.
func newSecureCluster(t *testing.T, serverTLS, clientTLS *tls.Config) string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.SeedTopics(secPartitions, "orders")}
	for _, u := range secUsers {
		opts = append(opts, kfake.Superuser(u.mech, u.user, u.pass))
	}
	if serverTLS != nil {
		opts = append(opts, kfake.TLS(serverTLS))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]

	mech, err := scram.Mechanism(scram.SHA512, secUsers[1].user, secUsers[1].pass)
	if err != nil {
		t.Fatal(err)
	}
	seedSecure(t, addr, mech, clientTLS)
	return addr
}

func seedSecure(t *testing.T, addr string, mech sasl.Mechanism, clientTLS *tls.Config) {
	t.Helper()
	tr := &kafka.Transport{SASL: mech, TLS: clientTLS}
	defer tr.CloseIdleConnections()
	for p := 0; p < secPartitions; p++ {
		w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "orders", Transport: tr, RequiredAcks: kafka.RequireAll,
			Balancer: balancer(p), BatchTimeout: time.Millisecond}
		var msgs []kafka.Message
		for i := 0; i < secPerPart; i++ {
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)),
				Time: t0.Add(time.Duration(i) * time.Minute)})
		}
		err := w.WriteMessages(context.Background(), msgs...)
		w.Close()
		if err != nil {
			t.Fatalf("seed partition %d: %v", p, err)
		}
	}
}

// secPlan is a plan for addr whose source block is source (YAML flow
// mapping entries after brokers and topic); ${KAFKA_PASSWORD} expands to
// password. It returns the plan and the path of its file sink.
func secPlan(t *testing.T, addr, source, window, password string) (*plan.Plan, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	yaml := fmt.Sprintf(`
version: 1
name: sec-plan
source:
  brokers: ["%s"]
  topic: orders
%s
group: replay.sec
window:
%s
sink: {type: file, path: %s, batch_size: 10}
`, addr, source, window, out)
	env := func(k string) (string, bool) {
		if k == "KAFKA_PASSWORD" {
			return password, true
		}
		return "", false
	}
	p, err := plan.Parse(t.Name()+".yaml", []byte(yaml), plan.LoadOptions{Sinks: registry.Catalog(), LookupEnv: env})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p, out
}

func saslSource(mech, user string) string {
	return fmt.Sprintf("  sasl:\n    mechanism: %s\n    username: %s\n    password: ${KAFKA_PASSWORD}", mech, user)
}

// replaySecure connects, prepares and runs p into its file sink.
func replaySecure(t *testing.T, p *plan.Plan) (*Cluster, error) {
	t.Helper()
	ctx := context.Background()
	c, err := Connect(ctx, p.Source)
	if err != nil {
		return nil, err
	}
	t.Cleanup(c.Close)
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		return c, err
	}
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	_, err = job.Run(ctx, fs)
	return c, err
}

// coordRange lists "partition/offset" for offsets [from, to) of every partition.
func coordRange(from, to int) []string {
	var out []string
	for p := 0; p < secPartitions; p++ {
		for o := from; o < to; o++ {
			out = append(out, fmt.Sprintf("%d/%d", p, o))
		}
	}
	return out
}

// requireSameCoords compares what the sink holds with want.
func requireSameCoords(t *testing.T, out string, want []string) {
	t.Helper()
	got := readCoords(t, out)
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("delivered %d records, want %d: %s", len(got), len(want), diff(want, got))
	}
}

// Each mechanism replays the whole window over plain-text SASL.
func TestSASLReplay(t *testing.T) {
	addr := newSecureCluster(t, nil, nil)
	for i, u := range secUsers {
		t.Run(u.mech, func(t *testing.T) {
			window := "  offsets: {0: {from: 5, to: 25}, 1: {from: 5, to: 25}}"
			p, out := secPlan(t, addr, saslSource(u.mech, u.user), window, u.pass)
			p.Group = fmt.Sprintf("replay.sec.%d", i)
			c, err := replaySecure(t, p)
			noSecret(t, err)
			if err != nil {
				t.Fatal(err)
			}
			noSecret(t, nil, c.Warnings...)
			// PLAIN sends the password as is: without TLS that deserves a
			// warning, once, from the plan's validation (which every command
			// shows), not again from the connection.
			clear := slices.ContainsFunc(p.Warnings(), func(w plan.Problem) bool { return strings.Contains(w.String(), "clear text") })
			if clear != (u.mech == "PLAIN") || len(c.Warnings) > 0 {
				t.Errorf("plan warnings %q, connection warnings %q: want one clear-text warning of the plan for PLAIN, none otherwise, and none of the connection", p.Warnings(), c.Warnings)
			}
			requireSameCoords(t, out, coordRange(5, 25))
		})
	}
}

func timeWindowMinutes(from, to int) string {
	return timeWindow(t0.Add(time.Duration(from)*time.Minute), t0.Add(time.Duration(to)*time.Minute))
}

// TLS verified against the plan's CA file, with SCRAM-SHA-512 on top: a time
// window resolves (ListOffsets by time) and replays exactly.
func TestTLSReplayWithCAFile(t *testing.T) {
	pki := newTestPKI(t)
	addr := newSecureCluster(t, pki.serverTLS(false), &tls.Config{RootCAs: pki.pool})
	u := secUsers[1]
	src := saslSource(u.mech, u.user) + fmt.Sprintf("\n  tls: {enabled: true, ca_file: %s}", pki.caFile)
	p, out := secPlan(t, addr, src, timeWindowMinutes(10, 30), u.pass)
	c, err := replaySecure(t, p)
	noSecret(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", c.Warnings)
	}
	requireSameCoords(t, out, coordRange(10, 30))
}

// A CA that did not sign the broker's certificate: the error says it is TLS
// and what is wrong with the certificate.
func TestTLSWrongCA(t *testing.T) {
	pki := newTestPKI(t)
	addr := newSecureCluster(t, pki.serverTLS(false), &tls.Config{RootCAs: pki.pool})
	u := secUsers[1]
	src := saslSource(u.mech, u.user) + fmt.Sprintf("\n  tls: {enabled: true, ca_file: %s}", otherCAFile(t))
	p, _ := secPlan(t, addr, src, timeWindowMinutes(10, 30), u.pass)
	_, err := Connect(context.Background(), p.Source)
	noSecret(t, err)
	t.Logf("error: %v", err)
	if err == nil {
		t.Fatal("connected through a certificate the CA did not sign")
	}
	msg := err.Error()
	if !strings.Contains(msg, "certificate signed by unknown authority") || !strings.Contains(msg, "TLS") {
		t.Fatalf("the error must say it is TLS and name the certificate problem: %v", err)
	}
	if !strings.Contains(msg, "ca_file") {
		t.Errorf("the error should point at source.tls.ca_file: %v", err)
	}
}

// insecure_skip_verify connects and replays, and Connect says loudly that
// the broker is not authenticated.
func TestTLSInsecureSkipVerify(t *testing.T) {
	pki := newTestPKI(t)
	addr := newSecureCluster(t, pki.serverTLS(false), &tls.Config{RootCAs: pki.pool})
	u := secUsers[0]
	src := saslSource(u.mech, u.user) + "\n  tls: {enabled: true, insecure_skip_verify: true}"
	p, out := secPlan(t, addr, src, "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}", u.pass)
	c, err := replaySecure(t, p)
	noSecret(t, err)
	if err != nil {
		t.Fatal(err)
	}
	requireSameCoords(t, out, coordRange(0, secPerPart))
	noSecret(t, nil, c.Warnings...)
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "insecure_skip_verify") }) {
		t.Fatalf("Connect must warn that certificate verification is off, warnings: %q", c.Warnings)
	}
}

// mTLS: a broker that requires a client certificate accepts the plan's
// cert_file/key_file and rejects a client without one, saying it is TLS.
func TestTLSClientCertificate(t *testing.T) {
	pki := newTestPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.clientCert, pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	addr := newSecureCluster(t, pki.serverTLS(true), &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{cert}})
	u := secUsers[1]

	t.Run("with certificate", func(t *testing.T) {
		src := saslSource(u.mech, u.user) + fmt.Sprintf("\n  tls: {enabled: true, ca_file: %s, cert_file: %s, key_file: %s}", pki.caFile, pki.clientCert, pki.clientKey)
		p, out := secPlan(t, addr, src, timeWindowMinutes(0, 15), u.pass)
		_, err := replaySecure(t, p)
		noSecret(t, err)
		if err != nil {
			t.Fatal(err)
		}
		requireSameCoords(t, out, coordRange(0, 15))
	})
	t.Run("without certificate", func(t *testing.T) {
		src := saslSource(u.mech, u.user) + fmt.Sprintf("\n  tls: {enabled: true, ca_file: %s}", pki.caFile)
		p, _ := secPlan(t, addr, src, timeWindowMinutes(0, 15), u.pass)
		_, err := Connect(context.Background(), p.Source)
		noSecret(t, err)
		t.Logf("error: %v", err)
		if err == nil {
			t.Fatal("connected without the client certificate the broker requires")
		}
		if msg := err.Error(); !strings.Contains(msg, "TLS") || !strings.Contains(msg, "certificate") {
			t.Fatalf("the error must say it is TLS and mention the certificate: %v", err)
		}
	})
}

// A wrong password is reported as an authentication failure of the named
// user and mechanism, never as "unexpected EOF", and never with the password.
func TestSASLWrongPassword(t *testing.T) {
	addr := newSecureCluster(t, nil, nil)
	for _, u := range secUsers {
		t.Run(u.mech, func(t *testing.T) {
			p, _ := secPlan(t, addr, saslSource(u.mech, u.user), timeWindowMinutes(0, 10), wrongPassword)
			_, err := Connect(context.Background(), p.Source)
			noSecret(t, err)
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("connected with a wrong password")
			}
			want := fmt.Sprintf("SASL authentication failed for user %q", u.user)
			if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, u.mech) {
				t.Fatalf("want %q and the mechanism %s in the error, got: %v", want, u.mech, err)
			}
		})
	}
}

// A plan without SASL against a cluster that requires it: kafka-go only
// sees the broker hang up (unexpected EOF); the error must suggest SASL.
func TestSASLMissingOnClient(t *testing.T) {
	addr := newSecureCluster(t, nil, nil)
	p, _ := secPlan(t, addr, "", timeWindowMinutes(0, 10), "")
	_, err := Connect(context.Background(), p.Source)
	noSecret(t, err)
	t.Logf("error: %v", err)
	if err == nil {
		t.Fatal("connected without SASL to a cluster that requires it")
	}
	if msg := err.Error(); !strings.Contains(msg, "SASL") || !strings.Contains(msg, "source.sasl") {
		t.Fatalf("the error must suggest that the cluster may require SASL (source.sasl): %v", err)
	}
}

// A plan without TLS against a TLS listener: the error must suggest TLS.
func TestTLSMissingOnClient(t *testing.T) {
	pki := newTestPKI(t)
	addr := newSecureCluster(t, pki.serverTLS(false), &tls.Config{RootCAs: pki.pool})
	u := secUsers[1]
	p, _ := secPlan(t, addr, saslSource(u.mech, u.user), timeWindowMinutes(0, 10), u.pass)
	start := time.Now()
	_, err := Connect(context.Background(), p.Source)
	noSecret(t, err)
	t.Logf("error: %v", err)
	if err == nil {
		t.Fatal("connected in plain text to a TLS listener")
	}
	if msg := err.Error(); !strings.Contains(msg, "TLS") || !strings.Contains(msg, "source.tls") {
		t.Fatalf("the error must suggest that the listener may require TLS (source.tls): %v", err)
	}
	if d := time.Since(start); d > 12*time.Second {
		t.Errorf("took %v to fail", d)
	}
}

// A plan with TLS against a plain-text listener: the error must say TLS.
func TestTLSAgainstPlaintextListener(t *testing.T) {
	addr := newSecureCluster(t, nil, nil)
	u := secUsers[1]
	src := saslSource(u.mech, u.user) + fmt.Sprintf("\n  tls: {enabled: true, ca_file: %s}", newTestPKI(t).caFile)
	p, _ := secPlan(t, addr, src, timeWindowMinutes(0, 10), u.pass)
	// kfake (like any plain-text listener) waits for the rest of a "request"
	// that is really a ClientHello: the handshake only ends with the
	// deadline, here the caller's, shorter than the 10 s dial timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Connect(ctx, p.Source)
	noSecret(t, err)
	t.Logf("error: %v", err)
	if err == nil {
		t.Fatal("a TLS handshake succeeded with a plain-text listener")
	}
	if msg := err.Error(); !strings.Contains(msg, "TLS") || !strings.Contains(msg, "TLS listener") {
		t.Fatalf("the error must say the TLS handshake failed and ask whether the port is a TLS listener: %v", err)
	}
}

// A closed loopback port fails fast, within the dial timeout, with an error
// that names the address and says it is not reachable.
func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	u := secUsers[1]
	for name, src := range map[string]string{
		"plain": "",
		"sasl":  saslSource(u.mech, u.user),
		"tls":   saslSource(u.mech, u.user) + "\n  tls: {enabled: true, insecure_skip_verify: true}",
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := secPlan(t, addr, src, timeWindowMinutes(0, 10), u.pass)
			start := time.Now()
			_, err := Connect(context.Background(), p.Source)
			noSecret(t, err)
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("connected to a closed port")
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v to fail, more than the dial timeout", d)
			}
			if msg := err.Error(); !strings.Contains(msg, addr) || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "reachable") {
				t.Fatalf("the error must name %s and say it is not reachable: %v", addr, err)
			}
		})
	}
}

// One dead bootstrap broker among live ones does not stop the connection.
// Regression: the SASL/TLS probe dialed only the first bootstrap broker and
// failed when that one was down.
func TestConnectSkipsUnreachableBootstrapBroker(t *testing.T) {
	addr := newSecureCluster(t, nil, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	u := secUsers[1]
	p, out := secPlan(t, dead+", "+addr, saslSource(u.mech, u.user), timeWindowMinutes(0, 5), u.pass)
	_, err = replaySecure(t, p)
	noSecret(t, err)
	if err != nil {
		t.Fatal(err)
	}
	requireSameCoords(t, out, coordRange(0, 5))
}
