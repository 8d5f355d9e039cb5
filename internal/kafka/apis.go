package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the inclusive range of versions Wharf serves for one API.
type versionRange struct{ min, max int16 }

// apiVersions lists every API Wharf serves and the versions its handler
// fully implements (every field of the request is honoured or, where it only
// matters to replicas or tiered storage, has a defined answer). ApiVersions
// advertises exactly this table; any other key or version closes the
// connection, as Kafka does.
//
// The minimums are what Kafka 4.x still accepts or older where the old
// versions differ only in fields we handle, because older clients (sarama
// picks versions from its configured Kafka version) still send them.
var apiVersions = map[kmsg.Key]versionRange{
	kmsg.Produce:                 {3, 13}, // v3: record batches (magic 2) only
	kmsg.Fetch:                   {4, 18}, // v4: record batches
	kmsg.ListOffsets:             {1, 11},
	kmsg.OffsetForLeaderEpoch:    {2, 4},
	kmsg.Metadata:                {0, 13},
	kmsg.ApiVersions:             {0, 5},
	kmsg.CreateTopics:            {0, 7},
	kmsg.DeleteTopics:            {0, 6},
	kmsg.DeleteRecords:           {0, 2},
	kmsg.DescribeConfigs:         {0, 4},
	kmsg.AlterConfigs:            {0, 2},
	kmsg.DescribeLogDirs:         {0, 5},
	kmsg.CreatePartitions:        {0, 3},
	kmsg.IncrementalAlterConfigs: {0, 1},
	kmsg.DescribeCluster:         {0, 2},
	kmsg.InitProducerID:          {0, 5},

	// Replica management and membership, trivial on a single node.
	kmsg.ElectLeaders:               {0, 2},
	kmsg.AlterPartitionAssignments:  {0, 1},
	kmsg.ListPartitionReassignments: {0, 0},
	kmsg.UnregisterBroker:           {0, 0},

	// Security.
	kmsg.SASLHandshake:                {0, 1},
	kmsg.SASLAuthenticate:             {0, 2},
	kmsg.DescribeUserSCRAMCredentials: {0, 0},
	kmsg.AlterUserSCRAMCredentials:    {0, 0},
	kmsg.DescribeACLs:                 {0, 3},
	kmsg.CreateACLs:                   {0, 3},
	kmsg.DeleteACLs:                   {0, 3},
	kmsg.DescribeClientQuotas:         {0, 1},
	kmsg.AlterClientQuotas:            {0, 1},

	// Groups (internal/group).
	kmsg.OffsetCommit:           {0, 10},
	kmsg.OffsetFetch:            {0, 10},
	kmsg.FindCoordinator:        {0, 6},
	kmsg.JoinGroup:              {0, 9},
	kmsg.Heartbeat:              {0, 4},
	kmsg.LeaveGroup:             {0, 5},
	kmsg.SyncGroup:              {0, 5},
	kmsg.DescribeGroups:         {0, 6},
	kmsg.ListGroups:             {0, 5},
	kmsg.DeleteGroups:           {0, 3},
	kmsg.OffsetDelete:           {0, 0},
	kmsg.ConsumerGroupHeartbeat: {0, 1},
	kmsg.ConsumerGroupDescribe:  {0, 1},

	// Transactions (internal/txn), transaction version 1: EndTxn v5 and
	// TxnOffsetCommit v5 belong to KIP-890 part 2, which is not served.
	kmsg.AddPartitionsToTxn:   {0, 3},
	kmsg.AddOffsetsToTxn:      {0, 3},
	kmsg.EndTxn:               {0, 4},
	kmsg.TxnOffsetCommit:      {0, 4},
	kmsg.DescribeTransactions: {0, 0},
	kmsg.ListTransactions:     {0, 2},
}

// supportedVersions returns the served version range of an API key.
func supportedVersions(key int16) (versionRange, bool) {
	vr, ok := apiVersions[kmsg.Key(key)]
	return vr, ok
}

// handle runs the handler of r's API. An error closes the connection.
func (s *Server) handle(r *request) (*response, error) {
	switch m := r.msg.(type) {
	case *kmsg.ProduceRequest:
		return s.handleProduce(r, m)
	case *kmsg.FetchRequest:
		return s.handleFetch(r, m)
	case *kmsg.ListOffsetsRequest:
		return reply(s.handleListOffsets(r, m))
	case *kmsg.MetadataRequest:
		return reply(s.handleMetadata(r, m))
	case *kmsg.OffsetForLeaderEpochRequest:
		return reply(s.handleOffsetForLeaderEpoch(r, m))
	case *kmsg.ApiVersionsRequest:
		return reply(s.handleApiVersions(m))
	case *kmsg.SASLHandshakeRequest:
		return r.conn.handleSaslHandshake(m)
	case *kmsg.SASLAuthenticateRequest:
		return r.conn.handleSaslAuthenticate(m)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return reply(s.handleDescribeUserScramCredentials(r, m))
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return reply(s.handleAlterUserScramCredentials(r, m))
	case *kmsg.DescribeACLsRequest:
		return reply(s.handleDescribeACLs(r, m))
	case *kmsg.CreateACLsRequest:
		return reply(s.handleCreateACLs(r, m))
	case *kmsg.DeleteACLsRequest:
		return reply(s.handleDeleteACLs(r, m))
	case *kmsg.DescribeClientQuotasRequest:
		return reply(s.handleDescribeClientQuotas(r, m))
	case *kmsg.AlterClientQuotasRequest:
		return reply(s.handleAlterClientQuotas(r, m))
	case *kmsg.CreateTopicsRequest:
		return reply(s.handleCreateTopics(r, m))
	case *kmsg.DeleteTopicsRequest:
		return reply(s.handleDeleteTopics(r, m))
	case *kmsg.DeleteRecordsRequest:
		return reply(s.handleDeleteRecords(r, m))
	case *kmsg.DescribeConfigsRequest:
		return reply(s.handleDescribeConfigs(r, m))
	case *kmsg.AlterConfigsRequest:
		return reply(s.handleAlterConfigs(r, m))
	case *kmsg.DescribeLogDirsRequest:
		return reply(s.handleDescribeLogDirs(r, m))
	case *kmsg.CreatePartitionsRequest:
		return reply(s.handleCreatePartitions(r, m))
	case *kmsg.IncrementalAlterConfigsRequest:
		return reply(s.handleIncrementalAlterConfigs(r, m))
	case *kmsg.DescribeClusterRequest:
		return reply(s.handleDescribeCluster(r, m))
	case *kmsg.InitProducerIDRequest:
		return reply(s.handleInitProducerID(r, m))
	case *kmsg.ElectLeadersRequest:
		return reply(s.handleElectLeaders(r, m))
	case *kmsg.AlterPartitionAssignmentsRequest:
		return reply(s.handleAlterPartitionReassignments(r, m))
	case *kmsg.ListPartitionReassignmentsRequest:
		return reply(s.handleListPartitionReassignments(r, m))
	case *kmsg.UnregisterBrokerRequest:
		return reply(s.handleUnregisterBroker(r, m))
	case *kmsg.OffsetCommitRequest:
		return reply(s.handleOffsetCommit(r, m))
	case *kmsg.OffsetFetchRequest:
		return reply(s.handleOffsetFetch(r, m))
	case *kmsg.FindCoordinatorRequest:
		return reply(s.handleFindCoordinator(r, m))
	case *kmsg.JoinGroupRequest:
		return reply(s.handleJoinGroup(r, m))
	case *kmsg.HeartbeatRequest:
		return reply(s.handleHeartbeat(r, m))
	case *kmsg.LeaveGroupRequest:
		return reply(s.handleLeaveGroup(r, m))
	case *kmsg.SyncGroupRequest:
		return reply(s.handleSyncGroup(r, m))
	case *kmsg.DescribeGroupsRequest:
		return reply(s.handleDescribeGroups(r, m))
	case *kmsg.ListGroupsRequest:
		return reply(s.handleListGroups(r, m))
	case *kmsg.DeleteGroupsRequest:
		return reply(s.handleDeleteGroups(r, m))
	case *kmsg.OffsetDeleteRequest:
		return reply(s.handleOffsetDelete(r, m))
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return reply(s.handleConsumerGroupHeartbeat(r, m))
	case *kmsg.ConsumerGroupDescribeRequest:
		return reply(s.handleConsumerGroupDescribe(r, m))
	case *kmsg.AddPartitionsToTxnRequest:
		return reply(s.handleAddPartitionsToTxn(r, m))
	case *kmsg.AddOffsetsToTxnRequest:
		return reply(s.handleAddOffsetsToTxn(r, m))
	case *kmsg.EndTxnRequest:
		return reply(s.handleEndTxn(r, m))
	case *kmsg.TxnOffsetCommitRequest:
		return reply(s.handleTxnOffsetCommit(r, m))
	case *kmsg.DescribeTransactionsRequest:
		return reply(s.handleDescribeTransactions(r, m))
	case *kmsg.ListTransactionsRequest:
		return reply(s.handleListTransactions(r, m))
	default:
		// decodeRequest only lets through keys listed in apiVersions.
		return nil, fmt.Errorf("no handler for %T", m)
	}
}

// reply wraps a plain handler's answer.
func reply(msg kmsg.Response, err error) (*response, error) {
	if err != nil {
		return nil, err
	}
	return &response{msg: msg}, nil
}
