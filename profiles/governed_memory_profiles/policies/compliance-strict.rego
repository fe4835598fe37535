# compliance-strict, as Rego: the same rules as compliance-strict.cedar, beside the
# profile's built-in policies. Each message is the reason a decision records.
package governed_memory.compliance_strict

import rego.v1

# What the built-in policies and the fixed scope rule allow, this module allows: the
# rules below only take away.
default allow := true

# Support agents may read any project's memories they can reach, but never write a
# preference memory outside their team's project. Only an add (or an update that sets
# the type) says which type it writes; a write that does not say could be to a
# preference, so it is refused too.
deny contains "support-agents-never-write-foreign-preferences" if {
	input.action_kind == "write"
	input.principal.kind == "agent"
	team := data.teams.support
	input.principal.principal_id in team.agents
	not input.resource.project_id == team.project_id
	not names_another_type
}

names_another_type if input.resource.memory_type != "preference"

# Text picked up from the web may carry injected instructions: a person looks first.
review contains "web-sourced-memories-need-review" if {
	input.action == "add"
	input.resource.source_type == "web"
}

# A memory labelled restricted (metadata sensitivity = "restricted") is written by an
# administrator only.
deny contains "restricted-memories-need-admin" if {
	input.action_kind == "write"
	input.resource.sensitivity == "restricted"
	not "memory:admin" in input.principal.permissions
}
