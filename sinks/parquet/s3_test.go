package parquet_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

const (
	s3Access = "replaytest"
	s3Secret = "replaytestsecret"
)

// versitygw starts a versitygw S3 gateway over a fresh directory with
// one bucket, "lake", and returns its endpoint. The binary comes from
// scripts/oracles (REPLAY_VERSITYGW, or versitygw in REPLAY_BIN_DIR or
// ~/.cache/replay/bin);
// the test skips without it unless REPLAY_TEST_REQUIRE_ORACLES=1.
func versitygw(t *testing.T) string {
	return startVersitygw(t, versitygwBin(t), freeAddr(t))
}

// freeAddr is a loopback address no one listens on (yet).
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// versitygwBin is the versitygw binary (see versitygw).
func versitygwBin(t *testing.T) string {
	bin := os.Getenv("REPLAY_VERSITYGW")
	if bin == "" {
		dir := os.Getenv("REPLAY_BIN_DIR")
		if dir == "" {
			home, _ := os.UserHomeDir()
			dir = filepath.Join(home, ".cache", "replay", "bin")
		}
		bin = filepath.Join(dir, "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no versitygw binary at %s (%v): run scripts/oracles", bin, err)
		if os.Getenv("REPLAY_TEST_REQUIRE_ORACLES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// startVersitygw starts versitygw (bin) on addr over a fresh directory
// with one bucket, "lake", and returns its endpoint once it listens.
func startVersitygw(t *testing.T, bin, addr string) string {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "lake"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--access", s3Access, "--secret", s3Secret, "--port", addr, "posix", root)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("versitygw:\n%s", logs.String())
		}
	})
	testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, func() string { return "versitygw does not listen: " + logs.String() })
	return "http://" + addr
}

func s3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", UsePathStyle: true, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(s3Access, s3Secret, "")})
}

func s3Config(endpoint, prefix string) *parquet.S3 {
	return &parquet.S3{URL: "s3://lake/" + prefix, Endpoint: endpoint, ForcePathStyle: true, AccessKeyID: s3Access, SecretAccessKey: s3Secret}
}

// download copies every object under prefix in the bucket into dir.
func download(t *testing.T, c *s3.Client, prefix, dir string) {
	t.Helper()
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		obj, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, strings.TrimPrefix(aws.ToString(o.Key), prefix))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The same window written to a bucket and to a directory gives the same
// objects, byte for byte (the manifests agree), and the objects read back
// as the records; a re-run changes nothing; one object is large enough to
// be uploaded in parts (the test's max_rows_per_file puts six of the eleven
// 1 MiB values in one object).
func TestS3SameObjectsAsDirectory(t *testing.T) {
	endpoint := versitygw(t)
	window := sinktest.Window(3, 2)
	corpus := sinktest.Corpus()
	for i := range corpus {
		corpus[i].Partition = 2
	}
	for off := int64(20); off < 30; off++ { // with the corpus's, 11 MiB of random bytes
		r := sinktest.Corpus()[4]
		r.Partition, r.Offset = 2, off
		corpus = append(corpus, r)
	}
	window = append(window, corpus)
	cfg := parquet.Config{Topic: "orders", MaxRowsPerFile: 9, RunID: "r", Fingerprint: "f", Ranges: ranges(3, 0, 100000), Compression: "none"}
	local := cfg
	local.Path = filepath.Join(t.TempDir(), "local")
	ls := open(t, local)
	sinktest.WriteAll(t, ls, window, 9, 6)
	if err := ls.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	remote := cfg
	remote.S3 = s3Config(endpoint, "backfill/")
	remote.S3.MultipartAbove, remote.S3.PartSize = 5<<20, 5<<20 // S3's smallest part
	remote.StagingDir = t.TempDir()
	for run := range 2 {
		rs := open(t, remote)
		sinktest.WriteAll(t, rs, window, uint64(9+run), 6)
		if err := rs.Finish(t.Context()); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
	}
	got := filepath.Join(t.TempDir(), "got")
	download(t, s3Client(endpoint), "backfill/", got)
	if a, b := readFile(t, filepath.Join(got, parquet.ManifestName)), readFile(t, filepath.Join(local.Path, parquet.ManifestName)); !bytes.Equal(a, b) {
		t.Fatalf("the bucket's manifest:\n%s\ndiffers from the directory's:\n%s", a, b)
	}
	m := readManifest(t, got)
	big := false
	for _, o := range m.Objects {
		data := readFile(t, filepath.Join(got, o.Name))
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != o.SHA256 || int64(len(data)) != o.Bytes {
			t.Errorf("%s: %d bytes, sha256 %x; the manifest says %d, %s", o.Name, len(data), sum, o.Bytes, o.SHA256)
		}
		big = big || o.Bytes > 5<<20
	}
	if !big {
		t.Fatal("no object above the multipart size: the test uploads none in parts")
	}
	sinktest.Equal(t, "records in the bucket", contents(t, got), sinktest.Want(window))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resigning is a proxy to endpoint that changes each request with edit,
// then signs it again (SigV4 signs If-None-Match); edit may answer the
// request itself by returning false after writing w.
func resigning(t *testing.T, endpoint string, edit func(w http.ResponseWriter, r *http.Request) bool) string {
	target, _ := url.Parse(endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	signer := v4.NewSigner()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !edit(w, r) {
			return
		}
		r.Host = target.Host
		r.URL.Host = target.Host
		r.Header.Del("Authorization")
		creds := aws.Credentials{AccessKeyID: s3Access, SecretAccessKey: s3Secret}
		if err := signer.SignHTTP(r.Context(), creds, r, r.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", time.Now()); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// A store that ignores If-None-Match (a fault injected by a proxy that
// drops the header) still never gets an existing object overwritten: the
// object in the way, which replay did not write, is refused and left.
func TestS3StoreIgnoringIfNoneMatch(t *testing.T) {
	endpoint := versitygw(t)
	var dropped atomic.Int64
	proxy := resigning(t, endpoint, func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("If-None-Match") != "" {
			r.Header.Del("If-None-Match")
			dropped.Add(1)
		}
		return true
	})
	c := s3Client(endpoint)
	key := "lake-out/" + parquet.ObjectName("orders", 0, 0, 10)
	cfg := parquet.Config{Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: ranges(1, 0, 10), S3: s3Config(proxy, "lake-out/"), StagingDir: t.TempDir()}
	first := open(t, cfg)
	sinktest.MustWrite(t, first, sinktest.Rec(0, 3, "k", "v"))
	// Another writer puts an object at the name while the run goes on.
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader("someone else's")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Finish(t.Context()); !errors.Is(err, sinks.ErrRefused) {
		t.Fatalf("Finish over an object replay did not write: %v, want a refusal", err)
	}
	first.Close()
	if _, err := parquet.New(t.Context(), cfg); !errors.Is(err, sinks.ErrRefused) {
		t.Fatalf("New over an object replay did not write: %v, want a refusal", err)
	}
	obj, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(obj.Body); string(b) != "someone else's" {
		t.Fatalf("the object in the way changed: %q", b)
	}
	// The same through a store that honours the header: a clean run
	// publishes, and the header went out (and was dropped by the proxy).
	if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, sinktest.Rec(0, 3, "k", "v"))
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if dropped.Load() == 0 {
		t.Fatal("no request carried If-None-Match")
	}
}

// A multipart upload that fails halfway is aborted: no upload, and so no
// part, is left in the bucket, and no object appears.
func TestS3AbortsFailedMultipart(t *testing.T) {
	endpoint := versitygw(t)
	var parts atomic.Int64
	proxy := resigning(t, endpoint, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "" && parts.Add(1) == 2 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidPart</Code><Message>injected</Message></Error>`)
			return false
		}
		return true
	})
	cfg := parquet.Config{Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: ranges(1, 0, 10), Compression: "none",
		S3: s3Config(proxy, "mp/"), StagingDir: t.TempDir()}
	cfg.S3.MultipartAbove, cfg.S3.PartSize = 1<<20, 1<<20
	s := open(t, cfg)
	big := sinktest.Corpus()[4] // 1 MiB of random bytes
	for off := range int64(3) {
		r := big
		r.Offset = off
		sinktest.MustWrite(t, s, r)
	}
	if err := s.Finish(context.Background()); err == nil {
		t.Fatal("Finish succeeded with a part refused")
	}
	c := s3Client(endpoint)
	ups, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String("lake")})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left behind", len(ups.Uploads))
	}
	objs, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("mp/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Contents) != 0 || parts.Load() < 2 {
		t.Fatalf("%d objects after a failed upload (%d parts sent)", len(objs.Contents), parts.Load())
	}
}

// A run of another identity under a prefix that holds an earlier run's
// objects and manifest is refused, and the bucket is left as it was.
func TestS3EarlierRunRefused(t *testing.T) {
	endpoint := versitygw(t)
	cfg := parquet.Config{Topic: "orders", MaxRowsPerFile: 2, RunID: "r1", Fingerprint: "f", Ranges: ranges(1, 0, 5),
		S3: s3Config(endpoint, "again/"), StagingDir: t.TempDir()}
	s := open(t, cfg)
	for off := range int64(5) {
		sinktest.MustWrite(t, s, sinktest.Rec(0, off, "k", "v"))
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c := s3Client(endpoint)
	list := func() []string {
		out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("again/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key)+" "+aws.ToString(o.ETag))
		}
		return keys
	}
	before := list()
	later := cfg
	later.RunID, later.Ranges = "r2", ranges(1, 5, 9)
	_, err := parquet.New(t.Context(), later)
	want := "s3://lake/again/ holds 3 objects that are not this run's, the first s3://lake/again/" + parquet.ObjectName("orders", 0, 0, 2) + ": an earlier run of this plan wrote it (run r1)"
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "s3://lake/again/_manifest.json of an earlier run") {
		t.Fatalf("over an earlier run's objects: %v, want a refusal saying %q", err, want)
	}
	if after := list(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused run changed the bucket: %v, was %v", after, before)
	}
}

// A store that refuses the credentials, or has no such bucket, is said so
// when the sink opens, with the settings to check; neither is retried as
// a transient error.
func TestS3CredentialsAndBucketErrors(t *testing.T) {
	endpoint := versitygw(t)
	for _, tc := range []struct {
		name string
		s3   *parquet.S3
		want string
	}{
		{"wrong secret", &parquet.S3{URL: "s3://lake/creds/", Endpoint: endpoint, ForcePathStyle: true, AccessKeyID: s3Access, SecretAccessKey: "not-the-secret"},
			"the store refused the credentials (HTTP 403): check the sink's access_key_id and secret_access_key"},
		{"unknown access key", &parquet.S3{URL: "s3://lake/creds/", Endpoint: endpoint, ForcePathStyle: true, AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: s3Secret},
			"the store refused the credentials (HTTP "},
		{"no such bucket", &parquet.S3{URL: "s3://nosuchbucket/x/", Endpoint: endpoint, ForcePathStyle: true, AccessKeyID: s3Access, SecretAccessKey: s3Secret},
			"the bucket nosuchbucket does not exist (create it, or name another in the sink's url)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parquet.New(t.Context(), parquet.Config{Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: ranges(1, 0, 5), S3: tc.s3, StagingDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || sinks.Transient(err) {
				t.Fatalf("New: %v (transient %v), want a final error containing %q", err, sinks.Transient(err), tc.want)
			}
		})
	}
}

// A store that cannot be reached when the sink opens is tried again
// within the section's retry.max_elapsed, as a write is: the sink opens
// once the store is up. Within a spent budget, it fails, saying so.
func TestS3OpenRetriesUnreachableStore(t *testing.T) {
	bin, addr := versitygwBin(t), freeAddr(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a url's staging is in the user's cache directory
	spec := func(budget time.Duration, log zerolog.Logger) sinks.Spec {
		return sinks.Spec{
			Plan: plan.Sink{Type: parquet.Type, Retry: plan.SinkRetry{MaxElapsed: plan.Duration(budget)},
				Config: &parquet.Section{URL: "s3://lake/late/", Endpoint: "http://" + addr, ForcePathStyle: true, AccessKeyID: s3Access, SecretAccessKey: s3Secret}},
			Options: sinks.Options{Topic: "orders", Ranges: ranges(1, 0, 5), RunID: "r", Fingerprint: "f", Log: log}}
	}
	if _, err := parquet.Open(t.Context(), spec(0, zerolog.Nop())); err == nil || !sinks.Transient(err) || !strings.Contains(err.Error(), "tried 1 time in the sink's retry.max_elapsed") {
		t.Fatalf("Open with no budget and no store: %v, want the transient error, tried once", err)
	}
	retried := make(chan struct{})
	var once sync.Once
	log := zerolog.New(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "opening the output failed; retrying") {
			once.Do(func() { close(retried) })
		}
		return len(p), nil
	}))
	type opened struct {
		s   sinks.Sink
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := parquet.Open(t.Context(), spec(time.Minute, log))
		done <- opened{s, err}
	}()
	select {
	case <-retried:
	case o := <-done:
		t.Fatalf("Open returned before the store was up: %v", o.err)
	}
	startVersitygw(t, bin, addr)
	o := <-done
	if o.err != nil {
		t.Fatalf("Open once the store is up: %v", o.err)
	}
	o.s.Close()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// In a bucket, a directory marker (a key ending in '/', which some tools
// write) is not a stray file; a stray object under the topic's prefix is
// refused, saying "another url".
func TestS3DirectoryMarkersAndStrays(t *testing.T) {
	endpoint := versitygw(t)
	c := s3Client(endpoint)
	put := func(key string) {
		t.Helper()
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader("")}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := parquet.Config{Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: ranges(2, 0, 5), S3: s3Config(endpoint, "marks/"), StagingDir: t.TempDir()}
	put("marks/orders/1/")
	s := open(t, cfg)
	s.Close()
	put("marks/orders/1/part-0.parquet")
	_, err := parquet.New(t.Context(), cfg)
	want := "s3://lake/marks/orders/ holds 1 file not named as objects are (<partition>/<first>-<end>.parquet), the first s3://lake/marks/orders/1/part-0.parquet"
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "or write to another url") {
		t.Fatalf("New with a stray object: %v, want a refusal containing %q", err, want)
	}
}

// A multipart upload of an object left by a run killed mid-upload is
// aborted when a run uploads that object again: no parts stay behind.
func TestS3AbortsLeftoverMultipart(t *testing.T) {
	endpoint := versitygw(t)
	c := s3Client(endpoint)
	key := aws.String("mp/" + parquet.ObjectName("orders", 0, 0, 10))
	up, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String("lake"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(t.Context(), &s3.UploadPartInput{Bucket: aws.String("lake"), Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: strings.NewReader("a part of a killed run")}); err != nil {
		t.Fatal(err)
	}
	cfg := parquet.Config{Topic: "orders", RunID: "r", Fingerprint: "f", Ranges: ranges(1, 0, 10), Compression: "none",
		S3: s3Config(endpoint, "mp/"), StagingDir: t.TempDir()}
	cfg.S3.MultipartAbove, cfg.S3.PartSize = 5<<20, 5<<20 // S3's smallest part
	s := open(t, cfg)
	big := sinktest.Corpus()[4] // 1 MiB of random bytes
	for off := range int64(7) { // two parts
		r := big
		r.Offset = off
		sinktest.MustWrite(t, s, r)
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	ups, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String("lake")})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left behind", len(ups.Uploads))
	}
}
