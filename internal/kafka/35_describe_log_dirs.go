package kafka

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// DescribeLogDirs (key 35), v0-v5.
//
// Wharf has one log directory, the broker's DataDir. Null Topics describes
// every partition; otherwise the listed ones, leaving out topics and
// partitions that do not exist (as Kafka does). OffsetLag is 0 (the high
// watermark is the log end); there are no future replicas. v4+ reports the
// volume's total and usable bytes. It needs DESCRIBE on the cluster; without
// it the answer lists no directory and, from v3, says
// CLUSTER_AUTHORIZATION_FAILED, as in Kafka.

func (s *Server) handleDescribeLogDirs(r *request, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.allowedCluster(r, opDescribe) {
		if req.Version >= 3 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.broker.DataDir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = volumeBytes(dir.Dir)

	if req.Topics == nil {
		for _, t := range s.broker.Topics() {
			dir.Topics = append(dir.Topics, logDirTopic(t, nil))
		}
	} else {
		for _, rt := range req.Topics {
			t, err := s.broker.Topic(rt.Topic)
			if err != nil {
				continue
			}
			if lt := logDirTopic(t, rt.Partitions); len(lt.Partitions) > 0 {
				dir.Topics = append(dir.Topics, lt)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}

// logDirTopic describes the given partitions of t (nil: all of them).
func logDirTopic(t *broker.Topic, partitions []int32) kmsg.DescribeLogDirsResponseDirTopic {
	lt := kmsg.NewDescribeLogDirsResponseDirTopic()
	lt.Topic = t.Name()
	add := func(p *broker.Partition) {
		lp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		lp.Partition = p.Index()
		lp.Size = p.Size()
		lt.Partitions = append(lt.Partitions, lp)
	}
	if partitions == nil {
		for _, p := range t.Partitions() {
			add(p)
		}
		return lt
	}
	for _, i := range partitions {
		if p, err := t.Partition(i); err == nil {
			add(p)
		}
	}
	return lt
}
