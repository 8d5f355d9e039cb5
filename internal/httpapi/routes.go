package httpapi

// routes registers every endpoint of RabbitMQ's API that Wharf serves.
// Users, permissions and vhost writes come with authorization; they slot
// in here the same way.
func (s *Server) routes() {
	s.Route("GET", "overview", s.overview)
	s.Route("GET", "whoami", s.whoami)
	s.Route("GET", "nodes", s.listNodes)
	s.Route("GET", "nodes/{node}", s.getNode)
	s.Route("GET", "health/checks/alarms", s.alarmsCheck)
	s.Route("GET", "health/checks/local-alarms", s.alarmsCheck)
	s.Route("GET", "aliveness-test/{vhost}", s.alivenessTest)

	s.Route("GET", "vhosts", s.listVHosts)
	s.Route("GET", "vhosts/{vhost}", s.getVHost)

	s.Route("GET", "connections", s.listConnections)
	s.Route("GET", "connections/{connection}", s.getConnection)
	s.Route("DELETE", "connections/{connection}", s.closeConnection)
	s.Route("GET", "connections/{connection}/channels", s.listConnectionChannels)
	s.Route("GET", "vhosts/{vhost}/connections", s.listConnections)
	s.Route("GET", "channels", s.listChannels)
	s.Route("GET", "vhosts/{vhost}/channels", s.listChannels)
	s.Route("GET", "channels/{channel}", s.getChannel)
	s.Route("GET", "consumers", s.listConsumers)
	s.Route("GET", "consumers/{vhost}", s.listConsumers)

	s.Route("GET", "queues", s.listQueues)
	s.Route("GET", "queues/{vhost}", s.listQueues)
	s.Route("GET", "queues/{vhost}/{name}", s.getQueue)
	s.Route("PUT", "queues/{vhost}/{name}", s.putQueue)
	s.Route("DELETE", "queues/{vhost}/{name}", s.deleteQueue)
	s.Route("DELETE", "queues/{vhost}/{name}/contents", s.purgeQueue)
	s.Route("POST", "queues/{vhost}/{name}/get", s.getMessages)
	s.Route("GET", "queues/{vhost}/{name}/bindings", s.listQueueBindings)
	s.Route("POST", "queues/{vhost}/{name}/replay-dead-letters", s.replayDeadLetters) // Wharf's own

	s.Route("GET", "exchanges", s.listExchanges)
	s.Route("GET", "exchanges/{vhost}", s.listExchanges)
	s.Route("GET", "exchanges/{vhost}/{name}", s.getExchange)
	s.Route("PUT", "exchanges/{vhost}/{name}", s.putExchange)
	s.Route("DELETE", "exchanges/{vhost}/{name}", s.deleteExchange)
	s.Route("POST", "exchanges/{vhost}/{name}/publish", s.publish)
	s.Route("GET", "exchanges/{vhost}/{name}/bindings/source", s.listSourceBindings)
	s.Route("GET", "exchanges/{vhost}/{name}/bindings/destination", s.listDestinationBindings)

	s.Route("GET", "bindings", s.listBindings)
	s.Route("GET", "bindings/{vhost}", s.listBindings)
	s.Route("GET", "bindings/{vhost}/e/{source}/{kind}/{destination}", s.listBindingsBetween)
	s.Route("POST", "bindings/{vhost}/e/{source}/{kind}/{destination}", s.createBinding)
	s.Route("GET", "bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", s.getBinding)
	s.Route("DELETE", "bindings/{vhost}/e/{source}/{kind}/{destination}/{props}", s.deleteBinding)

	s.Route("GET", "policies", s.listPolicies)
	s.Route("GET", "policies/{vhost}", s.listPolicies)
	s.Route("GET", "policies/{vhost}/{name}", s.getPolicy)
	s.Route("PUT", "policies/{vhost}/{name}", s.putPolicy)
	s.Route("DELETE", "policies/{vhost}/{name}", s.deletePolicy)

	s.Route("GET", "definitions", s.exportDefinitions)
	s.Route("POST", "definitions", s.importDefinitions)
	s.Route("GET", "definitions/{vhost}", s.exportDefinitions)
	s.Route("POST", "definitions/{vhost}", s.importDefinitions)
}
