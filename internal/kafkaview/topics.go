package kafkaview

import (
	"encoding/base64"

	"github.com/wharf-mq/wharf/internal/broker"
)

// TopicSummary is one topic as the topic list shows it. Its counters
// (Records, BytesIn, BytesOut) only grow, so a client can derive rates
// from two reads.
type TopicSummary struct {
	Name       string `json:"name"`
	Internal   bool   `json:"internal"`
	Partitions int    `json:"partitions"`
	// Size is the bytes the topic's logs take on disk.
	Size int64 `json:"size"`
	// Messages is the offsets the logs hold now (end minus start,
	// transaction markers included); Records is the sum of the end
	// offsets, every offset ever written.
	Messages int64 `json:"messages"`
	Records  int64 `json:"records"`
	// BytesIn and BytesOut are the record bytes produced to and fetched
	// from the topic since the broker started.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	// Offline counts the partitions whose log could not be opened.
	Offline int `json:"offline_partitions"`
}

// PartitionInfo is one partition of a topic.
type PartitionInfo struct {
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	EndOffset   int64  `json:"end_offset"`
	Size        int64  `json:"size"`
	BytesIn     int64  `json:"bytes_in"`
	BytesOut    int64  `json:"bytes_out"`
	Offline     string `json:"offline,omitempty"` // why the log is out of service
}

// ConfigEntry is one topic config, as DescribeConfigs shows it.
type ConfigEntry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Default   bool   `json:"default"`
	ReadOnly  bool   `json:"read_only"`
	Sensitive bool   `json:"sensitive"`
}

// TopicDetail is one topic with its partitions and configs.
type TopicDetail struct {
	TopicSummary
	ID            string          `json:"id"`
	PartitionList []PartitionInfo `json:"partition_list"`
	Configs       []ConfigEntry   `json:"configs"`
}

// Topics lists every topic, internal ones included, sorted by name.
func (v *View) Topics() []TopicSummary {
	topics := v.broker.Topics()
	out := make([]TopicSummary, 0, len(topics))
	for _, t := range topics {
		s, _ := summarize(t)
		out = append(out, s)
	}
	return out
}

// Topic describes one topic.
func (v *View) Topic(name string) (TopicDetail, error) {
	t, err := v.topic(name)
	if err != nil {
		return TopicDetail{}, err
	}
	s, parts := summarize(t)
	id := t.ID()
	d := TopicDetail{TopicSummary: s, ID: encodeTopicID(id), PartitionList: parts, Configs: []ConfigEntry{}}
	for _, c := range t.Configs() {
		d.Configs = append(d.Configs, ConfigEntry{Name: c.Name, Value: c.Value, Default: c.IsDefault, ReadOnly: c.ReadOnly, Sensitive: c.Sensitive})
	}
	return d, nil
}

// summarize reads a topic's partitions once, for both its summary and
// its partition list.
func summarize(t *broker.Topic) (TopicSummary, []PartitionInfo) {
	parts := t.Partitions()
	s := TopicSummary{Name: t.Name(), Internal: t.Internal(), Partitions: len(parts)}
	infos := make([]PartitionInfo, 0, len(parts))
	for _, p := range parts {
		pi := PartitionInfo{Partition: p.Index(), StartOffset: p.StartOffset(), EndOffset: p.EndOffset(),
			Size: p.Size(), BytesIn: p.BytesIn(), BytesOut: p.BytesOut()}
		if err := p.Offline(); err != nil {
			pi.Offline = err.Error()
			s.Offline++
		} else {
			s.Messages += pi.EndOffset - pi.StartOffset
			s.Records += pi.EndOffset
		}
		s.Size += pi.Size
		s.BytesIn += pi.BytesIn
		s.BytesOut += pi.BytesOut
		infos = append(infos, pi)
	}
	return s, infos
}

// encodeTopicID spells a topic id as Kafka's tools do: URL-safe base64
// without padding.
func encodeTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
