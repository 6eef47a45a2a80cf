package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A refusal of the principal fails at once and names the ACL the request
// needs, and the Kafka error stays in the chain.
func TestAuthorizationFailuresNameTheACL(t *testing.T) {
	c := &Cluster{}
	for _, tc := range []struct {
		op   string
		err  error
		want string
	}{
		{"metadata", kafka.TopicAuthorizationFailed, "grant it Read on the topic (it implies Describe)"},
		{"offset fetch", kafka.GroupAuthorizationFailed, "grant it Read on the replay group (it implies Describe)"},
		{"join group", kerr.GroupAuthorizationFailed, "grant it Read on the replay group"},
		{"offset delete", kafka.GroupAuthorizationFailed, "grant it Delete on the replay group"},
	} {
		_, err := call(context.Background(), c, tc.op, func(context.Context) (int, error) { return 0, tc.err })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("%s refused with %v: got %v, want it to say %q", tc.op, tc.err, err, tc.want)
		}
	}
	err := commitErrors(nil, "g", "t", []kafka.OffsetCommitPartition{{Partition: 0, Error: kafka.TopicAuthorizationFailed}, {Partition: 1, Error: kafka.TopicAuthorizationFailed}})
	if err == nil || !strings.Contains(err.Error(), "commit to group g: t/0: ") || !strings.Contains(err.Error(), "grant it Read on the topic") {
		t.Errorf("commit refused: %v", err)
	}
	if _, err := call(context.Background(), c, "metadata", func(context.Context) (int, error) { return 0, kafka.InvalidTopic }); err == nil || strings.Contains(err.Error(), "grant") {
		t.Errorf("another error: %v", err)
	}
}

// Reading the group's commits (status, resume) without the ACL on the
// group names it too.
func TestReadingCommitsWithoutTheGroupACLNamesIt(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kc.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.OffsetFetchRequest)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	c := &Cluster{client: &kafka.Client{Addr: kafka.TCP(kc.ListenAddrs()...), Transport: &kafka.Transport{}}}
	_, err = c.Committed(t.Context(), "replay.orders", "orders", []int32{0})
	if err == nil || !strings.Contains(err.Error(), "read commits of group replay.orders: ") || !strings.Contains(err.Error(), "grant it Read on the replay group") {
		t.Errorf("Committed = %v, want the ACL to grant", err)
	}
}
