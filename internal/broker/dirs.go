package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Partition directories are DataDir/<topic>-<partition>. Each holds
// partition.metadata naming its topic's ID, as Kafka's does, so that a
// directory is only ever used, or removed, by the topic that made it.
//
// Data is removed only where the metadata log records its topic's
// deletion. A directory whose topic the metadata log does not know (a lost
// or cut-short metadata log, a restored backup, a creation that crashed
// before it was recorded) is moved aside as <dir>.<random>-stray, as Kafka
// does, and logged as an error: never deleted.

const (
	partitionMetadataFile = "partition.metadata"
	straySuffix           = "-stray"
)

func partitionMetadata(topicID [16]byte) []byte {
	return []byte("topic_id: " + hex.EncodeToString(topicID[:]) + "\n")
}

// dirOwner reads the topic ID in dir's partition.metadata. found is false,
// with no error, when the directory or the file does not exist.
func dirOwner(dir string) (topicID [16]byte, found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if errors.Is(err, os.ErrNotExist) {
		return topicID, false, nil
	}
	if err != nil {
		return topicID, false, err
	}
	text, _ := strings.CutPrefix(strings.TrimSpace(string(data)), "topic_id: ")
	id, err := hex.DecodeString(text)
	if err != nil || len(id) != len(topicID) {
		return topicID, false, fmt.Errorf("%s holds %q, not a topic ID", filepath.Join(dir, partitionMetadataFile), data)
	}
	copy(topicID[:], id)
	return topicID, true, nil
}

// checkPartitionDir checks at start-up that dir is the directory of a
// partition of topicID. Any other state is an error that keeps the
// partition offline: a missing directory or partition.metadata (the data
// is not there; making an empty log would hide that), one that cannot be
// read, or another topic's directory, which is cleared away (disposeOf)
// but is no substitute for this partition's data.
func (b *Broker) checkPartitionDir(dir string, topicID [16]byte) error {
	owner, found, err := dirOwner(dir)
	switch {
	case err != nil:
		return err
	case found && owner == topicID:
		return nil
	case found:
		if err := b.disposeOf(dir, owner, true); err != nil {
			return err
		}
		return fmt.Errorf("%s held the data of topic ID %x, not this topic's", dir, owner)
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("the partition's directory is missing: %w", err)
	}
	return fmt.Errorf("%s has no %s", dir, partitionMetadataFile)
}

// createPartitionDir makes dir the directory of a new partition of
// topicID, with partition.metadata fsynced in it. A directory of the same
// topic (left by a creation that was never recorded) is reused, anything
// else there is cleared away first (disposeOf). The entry in the data
// directory is not fsynced: the caller does that once for all the
// partitions it creates. On an error, dir is as it was or gone.
func (b *Broker) createPartitionDir(dir string, topicID [16]byte) error {
	owner, found, err := dirOwner(dir)
	if found && owner == topicID {
		return nil
	}
	if _, statErr := os.Stat(dir); statErr == nil {
		if err := b.disposeOf(dir, owner, found); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, partitionMetadataFile), partitionMetadata(topicID)); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// disposeOf clears dir, which does not belong to the topic that wants it:
// removed if its owner is known and the metadata log records that topic's
// deletion (a crash between recording it and removing the files), moved
// aside otherwise, never deleted, as Kafka moves aside a stray replica
// (KAFKA-14616): the metadata may have been lost, or, in a cluster, the
// deletion's record compacted away.
func (b *Broker) disposeOf(dir string, owner [16]byte, ownerKnown bool) error {
	if ownerKnown && b.topicDeleted(owner) {
		b.logger.Info("removing data of a deleted topic", "dir", dir)
		return os.RemoveAll(dir)
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	to := dir + "." + hex.EncodeToString(suffix[:]) + straySuffix
	if err := os.Rename(dir, to); err != nil {
		return fmt.Errorf("move aside %s: %w", dir, err)
	}
	if b.cfg.Cluster != nil && ownerKnown {
		// The cluster's metadata comes from its quorum, not from this
		// node's disk alone: a topic it does not know was deleted while
		// this node was away, its deletion's record compacted away
		// before the node caught up (a KRaft broker's stray replica).
		b.logger.Warn("moved aside a replica directory of a topic the cluster no longer knows: it was most likely "+
			"deleted while this node was down, and the record of the deletion compacted away before the node "+
			"came back; nothing is wrong with the metadata; the data is kept there: delete the directory once "+
			"it is not wanted", "dir", dir, "moved_to", to, "topic_id", hex.EncodeToString(owner[:]))
		return nil
	}
	b.logger.Error("moved aside the directory of a topic the metadata log does not know; its data is kept there "+
		"(if the metadata log was lost or restored from an older copy, stop the broker, put the newest "+
		"copy back and move the directory back)", "dir", dir, "moved_to", to)
	return nil
}

// topicDeleted reports whether the metadata log records the deletion of
// the topic id. disposeOf asks from goroutines beside a cluster's apply
// loop (a reassignment opening a replica), which records deletions.
func (b *Broker) topicDeleted(id [16]byte) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.deletedTopics[id]
}

// settleOrphanDirs clears the data directory, at start-up, of partition
// directories no live partition uses (disposeOf). It leaves alone those of
// live topics (a partition they will create again reuses its directory)
// and everything that is not a partition directory.
func (b *Broker) settleOrphanDirs() {
	entries, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		b.logger.Warn("cannot list data directory", "err", err)
		return
	}
	used := map[string]bool{}
	for _, t := range b.topics {
		for _, p := range t.partitions {
			used[p.dir] = true
		}
	}
	for _, e := range entries {
		dir := filepath.Join(b.cfg.DataDir, e.Name())
		if !e.IsDir() || used[dir] || strings.HasSuffix(e.Name(), straySuffix) {
			continue
		}
		owner, found, err := dirOwner(dir)
		if !found && err == nil {
			continue // not a partition directory
		}
		if found && b.byID[owner] != nil {
			continue
		}
		if err := b.disposeOf(dir, owner, found); err != nil {
			b.logger.Error("cannot clear away a partition directory", "dir", dir, "err", err)
		}
	}
}

// writeFileSync writes a small file and fsyncs it and its directory, so it
// exists after a crash.
func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory, so that the entries created in it survive a
// crash. A variable so that a test can see which directories are fsynced,
// and when: no file system at hand drops unsynced entries on demand.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
