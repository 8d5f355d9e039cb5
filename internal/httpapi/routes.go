package httpapi

// routes registers every endpoint of RabbitMQ's API that Wharf serves,
// with who may call it (authz.go) as RabbitMQ's management plugin says.
func (s *Server) routes() {
	s.route("GET", "overview", anyManager, s.overview)
	s.route("GET", "whoami", anyManager, s.whoami)
	s.route("GET", "nodes", monitor, s.listNodes)
	s.route("GET", "nodes/{node}", monitor, s.getNode)
	s.route("GET", "health/checks/alarms", anyManager, s.alarmsCheck)
	s.route("GET", "health/checks/local-alarms", anyManager, s.alarmsCheck)
	s.route("GET", "aliveness-test/{vhost}", vhostUser, s.alivenessTest)

	s.route("GET", "vhosts", anyManager, s.listVHosts)
	s.route("GET", "vhosts/{vhost}", admin, s.getVHost)
	s.route("PUT", "vhosts/{vhost}", admin, s.putVHost)
	s.route("DELETE", "vhosts/{vhost}", admin, s.deleteVHost)
	s.route("GET", "vhosts/{vhost}/permissions", admin, s.listPermissions)
	s.route("GET", "vhosts/{vhost}/topic-permissions", admin, s.listTopicPermissions)

	s.route("GET", "users", admin, s.listUsers)
	s.route("GET", "users/{user}", admin, s.getUser)
	s.route("PUT", "users/{user}", admin, s.putUser)
	s.route("DELETE", "users/{user}", admin, s.deleteUser)
	s.route("GET", "users/{user}/permissions", admin, s.listPermissions)
	s.route("GET", "users/{user}/topic-permissions", admin, s.listTopicPermissions)

	s.route("GET", "permissions", admin, s.listPermissions)
	s.route("GET", "permissions/{vhost}/{user}", admin, s.getPermission)
	s.route("PUT", "permissions/{vhost}/{user}", admin, s.putPermission)
	s.route("DELETE", "permissions/{vhost}/{user}", admin, s.deletePermission)
	s.route("GET", "topic-permissions", admin, s.listTopicPermissions)
	s.route("GET", "topic-permissions/{vhost}/{user}", admin, s.listTopicPermissions)
	s.route("PUT", "topic-permissions/{vhost}/{user}", admin, s.putTopicPermission)
	s.route("DELETE", "topic-permissions/{vhost}/{user}", admin, s.deleteTopicPermissions)

	s.route("GET", "connections", anyManager, s.listConnections)
	s.route("GET", "connections/{connection}", anyManager, s.getConnection)
	s.route("DELETE", "connections/{connection}", anyManager, s.closeConnection)
	s.route("GET", "connections/{connection}/channels", anyManager, s.listConnectionChannels)
	s.route("GET", "vhosts/{vhost}/connections", vhostUser, s.listConnections)
	s.route("GET", "channels", anyManager, s.listChannels)
	s.route("GET", "vhosts/{vhost}/channels", vhostUser, s.listChannels)
	s.route("GET", "channels/{channel}", anyManager, s.getChannel)
	s.route("GET", "consumers", anyManager, s.listConsumers)
	s.route("GET", "consumers/{vhost}", vhostUser, s.listConsumers)

	s.route("GET", "queues", anyManager, s.listQueues)
	s.route("GET", "queues/{vhost}", vhostUser, s.listQueues)
	s.route("GET", "queues/{vhost}/{name}", vhostUser, s.getQueue)
	s.route("PUT", "queues/{vhost}/{name}", vhostUser, s.putQueue)
	s.route("DELETE", "queues/{vhost}/{name}", vhostUser, s.deleteQueue)
	s.route("DELETE", "queues/{vhost}/{name}/contents", vhostUser, s.purgeQueue)
	s.route("POST", "queues/{vhost}/{name}/get", vhostUser, s.getMessages)
	s.route("GET", "queues/{vhost}/{name}/bindings", vhostUser, s.listQueueBindings)
	s.route("POST", "queues/{vhost}/{name}/replay-dead-letters", vhostUser, s.replayDeadLetters) // Wharf's own

	s.route("GET", "exchanges", anyManager, s.listExchanges)
	s.route("GET", "exchanges/{vhost}", vhostUser, s.listExchanges)
	s.route("GET", "exchanges/{vhost}/{name}", vhostUser, s.getExchange)
	s.route("PUT", "exchanges/{vhost}/{name}", vhostUser, s.putExchange)
	s.route("DELETE", "exchanges/{vhost}/{name}", vhostUser, s.deleteExchange)
	s.route("POST", "exchanges/{vhost}/{name}/publish", vhostUser, s.publish)
	s.route("GET", "exchanges/{vhost}/{name}/bindings/source", vhostUser, s.listSourceBindings)
	s.route("GET", "exchanges/{vhost}/{name}/bindings/destination", vhostUser, s.listDestinationBindings)

	s.route("GET", "bindings", anyManager, s.listBindings)
	s.route("GET", "bindings/{vhost}", vhostUser, s.listBindings)
	s.route("GET", "bindings/{vhost}/e/{source}/{kind}/{destination}", vhostUser, s.listBindingsBetween)
	s.route("POST", "bindings/{vhost}/e/{source}/{kind}/{destination}", vhostUser, s.createBinding)
	s.route("GET", "bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", vhostUser, s.getBinding)
	s.route("DELETE", "bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", vhostUser, s.deleteBinding)

	s.route("GET", "policies", anyManager, s.listPolicies)
	s.route("GET", "policies/{vhost}", vhostUser, s.listPolicies)
	s.route("GET", "policies/{vhost}/{name}", policymaker, s.getPolicy)
	s.route("PUT", "policies/{vhost}/{name}", policymaker, s.putPolicy)
	s.route("DELETE", "policies/{vhost}/{name}", policymaker, s.deletePolicy)

	s.route("GET", "definitions", admin, s.exportDefinitions)
	s.route("POST", "definitions", admin, s.importDefinitions)
	s.route("GET", "definitions/{vhost}", admin, s.exportDefinitions)
	s.route("POST", "definitions/{vhost}", admin, s.importDefinitions)
}
