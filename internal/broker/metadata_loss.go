package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// refuseDataWithoutMetadata refuses to start on a data directory that
// holds partitions or durable queues (counted by queueData, which may be
// nil) while its metadata log holds nothing: the log that defines them
// was removed or emptied. Starting would drop every topic and queue from
// the broker's view (and the orphan clean-up would clear their data away),
// so the operator must choose. A metadata log that lost only its newest
// records is seglog's to catch: it ends below its recovery point.
func refuseDataWithoutMetadata(dataDir string, meta *metadataLog, queueData func() (int, string, error)) error {
	if meta.log.EndOffset() > 0 {
		return nil
	}
	partitions, err := partitionDirs(dataDir)
	if err != nil {
		return err
	}
	queues, queuesDir := 0, ""
	if queueData != nil {
		if queues, queuesDir, err = queueData(); err != nil {
			return err
		}
	}
	if len(partitions) == 0 && queues == 0 {
		return nil // a new data directory
	}
	held := fmt.Sprintf("%d partitions", len(partitions))
	if len(partitions) > 0 {
		held += " (" + partitions[0] + ", ...)"
	}
	move := "the partition directories"
	if queueData != nil {
		held += fmt.Sprintf(" and %d durable queues", queues)
		move += " and " + queuesDir
	}
	return fmt.Errorf("the metadata log %s is missing or empty, but %s holds the data of %s, "+
		"which only it defines: restore it from a backup; to start without those topics and queues, "+
		"move %s out of %s first",
		filepath.Join(dataDir, metadataLogName), dataDir, held, move, dataDir)
}

// partitionDirs lists the partition directories in dataDir (those holding
// partition.metadata), leaving out the ones already moved aside.
func partitionDirs(dataDir string) ([]string, error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), straySuffix) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dataDir, e.Name(), partitionMetadataFile)); err == nil {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs, nil
}
