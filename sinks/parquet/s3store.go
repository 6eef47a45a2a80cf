package parquet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/replay-tool/replay/sinks"
)

// S3 is how a parquet sink reaches an S3-compatible store (Config.S3).
type S3 struct {
	// URL is s3://bucket/prefix/: objects are named under prefix.
	URL string
	// Endpoint is the store's base URL (http://127.0.0.1:7070); "" is AWS.
	Endpoint string
	// Region is the signing region; "" is us-east-1.
	Region string
	// ForcePathStyle addresses the bucket in the path, not the host name.
	ForcePathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials; both empty
	// takes none (an anonymous store).
	AccessKeyID, SecretAccessKey string
	// MultipartAbove is the size above which an object is uploaded in
	// parts of PartSize bytes (defaults 64 MiB and 16 MiB).
	MultipartAbove, PartSize int64
}

// s3Store is a store in a bucket under a prefix. An object is uploaded
// whole: one PutObject, or a multipart upload completed at once (aborted
// on a failure, so that no part is left behind), both conditional
// (If-None-Match: *) where the store honours it, after a HeadObject that
// finds an existing object where it does not.
type s3Store struct {
	client         *s3.Client
	bucket, prefix string
	multipartAbove int64
	partSize       int64
}

var _ store = (*s3Store)(nil)

// newS3Store parses c.URL and builds the client. The SDK retries
// throttling, 5xx and network errors a few times itself; what is left of
// them is a sinks.TransientError, which the runner retries within the
// plan's retry.max_elapsed.
func newS3Store(c S3) (*s3Store, error) {
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return nil, fmt.Errorf("parquet sink: url %q: want s3://bucket/prefix/", c.URL)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	opts := s3.Options{Region: cmp.Or(c.Region, "us-east-1"), UsePathStyle: c.ForcePathStyle,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 4; o.MaxBackoff = 5 * time.Second })}
	if c.Endpoint != "" {
		opts.BaseEndpoint = aws.String(c.Endpoint)
	}
	if c.AccessKeyID != "" || c.SecretAccessKey != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, "")
	} else {
		opts.Credentials = aws.AnonymousCredentials{}
	}
	st := &s3Store{client: s3.New(opts), bucket: u.Host, prefix: prefix, multipartAbove: c.MultipartAbove, partSize: c.PartSize}
	if st.multipartAbove <= 0 {
		st.multipartAbove = 64 << 20
	}
	if st.partSize <= 0 {
		st.partSize = 16 << 20
	}
	return st, nil
}

func (s *s3Store) key(name string) string { return s.prefix + name }

// Where is the object's s3:// URL.
func (s *s3Store) Where(name string) string { return "s3://" + s.bucket + "/" + s.key(name) }

// credentialCodes are the S3 error codes of credentials the store does
// not accept, whatever the HTTP status it answers them with.
// (XAdminUserNotFound: versitygw's answer to an unknown access key id,
// with a 404).
var credentialCodes = map[string]bool{"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "AccessDenied": true, "XAdminUserNotFound": true}

// s3Error classifies err from a call about name: a missing bucket and
// refused credentials say so, any other 404 (a missing object, whatever
// code the store gives it) wraps fs.ErrNotExist, 412 fs.ErrExist, 429, 5xx
// and network errors are transient.
func (s *s3Store) s3Error(name string, err error) error {
	if err == nil {
		return nil
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		var ae smithy.APIError
		errors.As(err, &ae)
		switch code := re.HTTPStatusCode(); {
		case ae != nil && ae.ErrorCode() == "NoSuchBucket":
			return fmt.Errorf("%s: the bucket %s does not exist (create it, or name another in the sink's url): %w", s.Where(name), s.bucket, err)
		case code == 401 || code == 403 || ae != nil && credentialCodes[ae.ErrorCode()]:
			return fmt.Errorf("%s: the store refused the credentials (HTTP %d): check the sink's access_key_id and secret_access_key (and region), and that they may list, read and write under the url: %w",
				s.Where(name), code, err)
		case code == 404:
			return fmt.Errorf("%s: %w", s.Where(name), fs.ErrNotExist)
		case code == 412:
			return fmt.Errorf("%s: %w", s.Where(name), fs.ErrExist)
		case code == 429 || code >= 500:
			return &sinks.TransientError{Err: fmt.Errorf("%s: %w", s.Where(name), err)}
		}
		return fmt.Errorf("%s: %w", s.Where(name), err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &sinks.TransientError{Err: fmt.Errorf("%s: %w", s.Where(name), err)}
}

// PutNew uploads local as name unless name exists.
func (s *s3Store) PutNew(ctx context.Context, name string, local *os.File) error {
	fi, err := local.Stat()
	if err != nil {
		return err
	}
	_, err = s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(name))})
	if err == nil {
		return fmt.Errorf("%s: %w", s.Where(name), fs.ErrExist)
	}
	if err := s.s3Error(name, err); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if fi.Size() > s.multipartAbove {
		return s.putMultipart(ctx, name, local, fi.Size())
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(name)), IfNoneMatch: aws.String("*"),
		Body: io.NewSectionReader(local, 0, fi.Size()), ContentLength: aws.Int64(fi.Size())})
	return s.s3Error(name, err)
}

// putMultipart uploads local in parts and completes the upload
// conditionally; on any failure it aborts the upload.
func (s *s3Store) putMultipart(ctx context.Context, name string, local *os.File, size int64) (err error) {
	key := aws.String(s.key(name))
	s.abortLeftovers(ctx, *key)
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: key})
	if err != nil {
		return s.s3Error(name, err)
	}
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: key, UploadId: up.UploadId}); aerr != nil {
			err = errors.Join(err, fmt.Errorf("abort the multipart upload %s of %s: %w", aws.ToString(up.UploadId), s.Where(name), aerr))
		}
	}()
	var parts []types.CompletedPart
	for n, off := int32(1), int64(0); off < size; n, off = n+1, off+s.partSize {
		l := min(s.partSize, size-off)
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: io.NewSectionReader(local, off, l), ContentLength: aws.Int64(l)})
		if err != nil {
			return s.s3Error(name, err)
		}
		// The part's checksums too: the SDK sends one with each part, and
		// a store checks the completed upload's parts against them.
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n), ChecksumCRC32: out.ChecksumCRC32,
			ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: key, UploadId: up.UploadId,
		IfNoneMatch: aws.String("*"), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return s.s3Error(name, err)
}

// abortLeftovers aborts the multipart uploads of key that a process
// killed mid-upload left (only the run that holds the object's name uploads
// it), so that their parts do not stay in the bucket. It is best effort:
// a store or a policy that refuses the listing keeps them.
func (s *s3Store) abortLeftovers(ctx context.Context, key string) {
	out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &key})
	if err != nil {
		return
	}
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) == key {
			_, _ = s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId})
		}
	}
}

// Open heads the object for its size; reads are ranged GETs.
func (s *s3Store) Open(ctx context.Context, name string) (objectReader, error) {
	h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(name))})
	if err != nil {
		return nil, s.s3Error(name, err)
	}
	return &s3Reader{ctx: ctx, st: s, name: name, size: aws.ToInt64(h.ContentLength), etag: h.ETag}, nil
}

// s3Reader reads an object at offsets, each read a ranged GET of the
// version Open saw (If-Match its ETag).
type s3Reader struct {
	ctx  context.Context
	st   *s3Store
	name string
	size int64
	etag *string
}

func (r *s3Reader) Size() int64  { return r.size }
func (r *s3Reader) Close() error { return nil }

func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	out, err := r.st.client.GetObject(r.ctx, &s3.GetObjectInput{Bucket: &r.st.bucket, Key: aws.String(r.st.key(r.name)),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end-1)), IfMatch: r.etag})
	if err != nil {
		return 0, r.st.s3Error(r.name, err)
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, p[:end-off])
	if err == nil && end < off+int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

// List lists the objects under prefix.
func (s *s3Store) List(ctx context.Context, prefix string) (map[string]int64, error) {
	out := map[string]int64{}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.key(prefix))})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.s3Error(prefix, err)
		}
		for _, o := range page.Contents {
			out[strings.TrimPrefix(aws.ToString(o.Key), s.prefix)] = aws.ToInt64(o.Size)
		}
	}
	return out, nil
}

// Replace puts data as name, unconditionally.
func (s *s3Store) Replace(ctx context.Context, name string, data []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(name)),
		Body: strings.NewReader(string(data)), ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json")})
	return s.s3Error(name, err)
}
