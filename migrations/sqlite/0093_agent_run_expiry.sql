-- sdk-agent-runtime: runs expire. A run's `status` gains `expired`: an
-- `active` run whose `ttl_deadline` has passed is moved there by the hub's
-- sweep (every HUB_AGENT_RUN_SWEEP_SECONDS) or by a completion or
-- cancellation that comes too late, with `agent.run.expired.v1`; like
-- `succeeded`, `failed` and `cancelled` it is final. `agent_run.status`
-- has no CHECK constraint (the values are the hub's `RunStatus`), so no
-- table is rebuilt. The sweep reads the active runs by deadline.
CREATE INDEX agent_run_due ON agent_run (ttl_deadline) WHERE status = 'active';
