//! The event types the hub emits, as constants. A test checks every one
//! against the platform baseline, so a misspelt type fails the build's
//! tests instead of answering 400 in production.

/// Declares the constants and `ALL`, the list the test walks.
macro_rules! event_types {
    ($($name:ident = $value:literal;)*) => {
        $(pub const $name: &str = $value;)*
        /// Every constant of this module.
        pub const ALL: &[&str] = &[$($value),*];
    };
}

event_types! {
    TENANT_CREATED = "tenant.tenant.created.v1";
    TENANT_POOL_MAP_CHANGED = "tenant.pool_map.changed.v1";
    API_KEY_ISSUED = "identity.api_key.issued.v1";
    API_KEY_ROTATED = "identity.api_key.rotated.v1";
    API_KEY_REVOKED = "identity.api_key.revoked.v1";
    APPLICATION_DISABLED = "identity.application.disabled.v1";
    PERSONA_SHREDDED = "identity.persona.shredded.v1";
    ROLE_GRANTED = "identity.role_assignment.granted.v1";
    ROLE_REVOKED = "identity.role_assignment.revoked.v1";
    EVENT_TYPE_REGISTERED = "audit.event_type.registered.v1";
    AGENT_DEFINED = "agent.definition.created.v1";
    AGENT_RUN_STARTED = "agent.run.started.v1";
    AI_GATEWAY_ROUTE_SET = "ai-gateway.route.set.v1";
    AI_GATEWAY_PII_REDACTED = "ai-gateway.pii.redacted.v1";
    AI_GATEWAY_COMPLETE = "ai-gateway.complete.v1";
    INGEST_BATCH_RECEIVED = "ingest.batch.received.v1";
    WORKFLOW_DEFINITION_REGISTERED = "workflow.definition.registered.v1";
    ADDRESS_CANONICALISED = "geo.address.canonicalised.v1";
    CONFIG_SET = "config.value.set.v1";
    CONFIG_REVOKED = "config.value.revoked.v1";
    CONFIG_ROTATED = "config.secret_ref.rotated.v1";
    FEATURE_FLAG_CREATED = "feature-flag.flag.created.v1";
    FEATURE_FLAG_ROLLOUT_CHANGED = "feature-flag.rollout.changed.v1";
    FEATURE_FLAG_KILL_SWITCH_ENGAGED = "feature-flag.kill_switch.engaged.v1";
    FEATURE_FLAG_KILL_SWITCH_RELEASED = "feature-flag.kill_switch.released.v1";
    RESIDENCY_NODE_CREATED = "tenant.residency_node.created.v1";
    ASSIGNMENT_RULE_SET_PUBLISHED = "assignment.rule_set.published.v1";
    ASSIGNMENT_RULE_SET_ACTIVATED = "assignment.rule_set.activated.v1";
    ASSIGNMENT_DECISION_RECORDED = "assignment.decision.recorded.v1";
    ASSIGNMENT_WORKLOAD_UPDATED = "assignment.workload.updated.v1";
    ASSIGNMENT_SIMULATION_COMPLETED = "assignment.simulation.completed.v1";
    ASSIGNMENT_OFFER_CREATED = "assignment.offer.created.v1";
    ASSIGNMENT_OFFER_ACCEPTED = "assignment.offer.accepted.v1";
    ASSIGNMENT_OFFER_DECLINED = "assignment.offer.declined.v1";
    ASSIGNMENT_OFFER_REASSIGNED = "assignment.offer.reassigned.v1";
    ASSIGNMENT_OFFER_EXPIRED = "assignment.offer.expired.v1";
    MEDIA_UPLOAD_STARTED = "media.upload.started.v1";
    MEDIA_BLOB_COMMITTED = "media.blob.committed.v1";
    WEBHOOK_ENDPOINT_CREATED = "webhook.endpoint.created.v1";
    WEBHOOK_ENDPOINT_UPDATED = "webhook.endpoint.updated.v1";
    WEBHOOK_ENDPOINT_DELETED = "webhook.endpoint.deleted.v1";
    WEBHOOK_DELIVERY_DEAD_LETTERED = "webhook.delivery.dead_lettered.v1";
    WEBHOOK_INBOUND_RECEIVED = "webhook.inbound.received.v1";
    VAULT_ENVELOPE_ENCRYPTED = "vault.envelope.encrypted.v1";
    VAULT_ENVELOPE_DECRYPTED = "vault.envelope.decrypted.v1";
    SECRETS_REFERENCE_CREATED = "secrets.reference.created.v1";
    SECRETS_REFERENCE_ROTATED = "secrets.reference.rotated.v1";
    SECRETS_REFERENCE_ACCESSED = "secrets.reference.accessed.v1";
    CONSENT_PURPOSE_CREATED = "consent.purpose.created.v1";
    CONSENT_GRANTED = "consent.consent.granted.v1";
    CONSENT_WITHDRAWN = "consent.consent.withdrawn.v1";
    DATA_RIGHTS_REQUEST_RECEIVED = "data-rights.request.received.v1";
    DATA_RIGHTS_EXECUTION_SUCCEEDED = "data-rights.execution.succeeded.v1";
    DATA_RIGHTS_EXECUTION_FAILED = "data-rights.execution.failed.v1";
    APPROVAL_ROUTE_CREATED = "approval.route.created.v1";
    APPROVAL_REQUEST_CREATED = "approval.request.created.v1";
    APPROVAL_STEP_DECIDED = "approval.step.decided.v1";
    APPROVAL_REQUEST_APPROVED = "approval.request.approved.v1";
    APPROVAL_REQUEST_REJECTED = "approval.request.rejected.v1";
    APPROVAL_REQUEST_OVERRIDDEN = "approval.request.overridden.v1";
    REBAC_RELATIONSHIP_CREATED = "rebac.relationship.created.v1";
    REBAC_RELATIONSHIP_DELETED = "rebac.relationship.deleted.v1";
    POLICY_BUNDLE_CREATED = "policy.bundle.created.v1";
    POLICY_BUNDLE_ACTIVATED = "policy.bundle.activated.v1";
    POLICY_DECISION_RECORDED = "policy.decision.recorded.v1";
    TRACE_EXPORT_REQUESTED = "trace.export.requested.v1";
    TRACE_EXPORT_READY = "trace.export.ready.v1";
    TAXONOMY_SCHEMA_PUBLISHED = "taxonomy.schema.published.v1";
    TAXONOMY_SCHEMA_OVERRIDDEN = "taxonomy.schema.overridden.v1";
    ADMIN_OPS_TOKEN_ISSUED = "security.admin_ops_token.issued.v1";
    ADMIN_OPS_TOKEN_REVOKED = "security.admin_ops_token.revoked.v1";
    TENANT_SUSPENDED = "tenant.tenant.suspended.v1";
    TENANT_RESUMED = "tenant.tenant.resumed.v1";
    ACTIVE_ACTIVE_PROFILE_CREATED = "tenant.active_active_profile.created.v1";
    FAILOVER_DRILL_COMPLETED = "tenant.failover_drill.completed.v1";
    SOVEREIGN_REGION_REGISTERED = "security.sovereign_region.registered.v1";
    SOVEREIGN_ATTESTATION_RECORDED = "security.sovereign_attestation.recorded.v1";
    SOVEREIGN_BUNDLE_RELEASED = "security.sovereign_bundle.released.v1";
    SOVEREIGN_BUNDLE_APPLIED = "security.sovereign_bundle.applied.v1";
    SOVEREIGN_LEAK_REPORTED = "security.sovereign_leak.reported.v1";
    ONPREM_INSTALL_REGISTERED = "security.onprem_install.registered.v1";
    ONPREM_BILLING_REPORT_GENERATED = "security.onprem_billing_report.generated.v1";
    ONPREM_BUNDLE_APPLIED = "security.onprem_bundle.applied.v1";
    STORM_INGESTED = "ingest.storm.ingested.v1";
    LINEAGE_BACKFILLED = "audit.lineage.backfilled.v1";
    FEDERATION_PROFILE_CREATED = "security.federation_profile.created.v1";
    EVIDENCE_CAPTURE_RECORDED = "evidence.capture.recorded.v1";
    SOURCE_CLAIM_ASSERTED = "source-record.claim.asserted.v1";
    SOURCE_CLAIM_SUPERSEDED = "source-record.claim.superseded.v1";
    IMPORT_TEMPLATE_PUBLISHED = "import.template.published.v1";
    PARSING_BATCH_COMPLETED = "parsing.batch.completed.v1";
    PROJECTION_ASSERTION_RECORDED = "projection.assertion.recorded.v1";
    PROJECTION_SNAPSHOT_REBUILT = "projection.snapshot.rebuilt.v1";
    METER_USAGE_RECORDED = "meter.usage.recorded.v1";
    METER_HARDCAP_REACHED = "meter.hardcap.reached.v1";
    BILLING_HARDCAP_OVERRIDDEN = "billing.hardcap.overridden.v1";
    BILLING_CATALOG_ACTIVATED = "billing.catalog.activated.v1";
    SECURITY_BYOK_BOUND = "security.byok.bound.v1";
    SECURITY_BYOK_REVOKED = "security.byok.revoked.v1";
    SECURITY_BYOK_ROTATED = "security.byok.rotated.v1";
    SECURITY_SIGNING_KEY_ROTATED = "security.signing_key.rotated.v1";
    BILLING_INVOICE_GENERATED = "billing.invoice.generated.v1";
    DATA_CREDITS_RESERVED = "data-credits.credit.reserved.v1";
    DATA_CREDITS_CONSUMED = "data-credits.credit.consumed.v1";
    DATA_CREDITS_RELEASED = "data-credits.credit.released.v1";
    DATA_CREDITS_GRANTED = "data-credits.credit.granted.v1";
    DATA_CREDITS_PRICE_SET = "data-credits.price.set.v1";
    PAYMENT_METHOD_STORED = "payment.method.stored.v1";
    PAYMENT_CHARGE_CAPTURED = "payment.charge.captured.v1";
    PAYMENT_CHARGE_FAILED = "payment.charge.failed.v1";
    ANALYTICS_BUILD_MATERIALISED = "analytics.build.materialised.v1";
    ANALYTICS_EXPORT_REQUESTED = "analytics.export.requested.v1";
    ANALYTICS_EXPORT_COMPLETED = "analytics.export.completed.v1";
    WEBHOOK_INBOUND_SECRET_SET = "webhook.inbound_secret.set.v1";
    DISPATCH_ROUTE_OPTIMIZED = "dispatch.route.optimized.v1";
    TENANT_OFFBOARDING_STARTED = "tenant.offboarding.started.v1";
    TENANT_OFFBOARDING_COMPLETED = "tenant.offboarding.completed.v1";
    ASSET_REGISTERED = "asset.asset.registered.v1";
    ASSET_UPDATED = "asset.asset.updated.v1";
    ASSET_CREDENTIAL_ISSUED = "asset.credential.issued.v1";
    ASSET_CREDENTIAL_REVOKED = "asset.credential.revoked.v1";
    COMMAND_ISSUED = "command.command.issued.v1";
    COMMAND_APPROVED = "command.command.approved.v1";
    COMMAND_REJECTED = "command.command.rejected.v1";
    COMMAND_ACKNOWLEDGED = "command.command.acknowledged.v1";
    DEVICE_REGISTERED = "device.device.registered.v1";
    DEVICE_ATTESTED = "device.device.attested.v1";
    DEVICE_REVOKED = "device.device.revoked.v1";
    DEVICE_PERSON_LINKED = "device.person.linked.v1";
    DEVICE_PERMISSION_SNAPSHOT_RECORDED = "device.permission_snapshot.recorded.v1";
    CRASH_REPORTED = "diagnostic.crash.reported.v1";
    HEALTH_REPORTED = "diagnostic.health.reported.v1";
    OUTBOX_DRAINED = "diagnostic.outbox.drained.v1";
    SYNC_BATCH_RECEIVED = "sync.batch.received.v1";
    SYNC_CONFLICT_RESOLVED = "sync.conflict.resolved.v1";
    SYNC_CONFLICT_ESCALATED = "sync.conflict.escalated.v1";
    PERSON_REGISTERED = "identity.person.registered.v1";
    APPLICATION_CREATED = "identity.application.created.v1";
    PERSONA_CREATED = "identity.persona.created.v1";
    MEMBERSHIP_CREATED = "tenant.membership.created.v1";
    PROFILE_BAND_UPDATED = "profile.band.updated.v1";
    PROFILE_PREFERENCE_CHANGED = "profile.preference.changed.v1";
    PROFILE_NOTIFICATION_ROUTING_CHANGED = "profile.notification_routing.changed.v1";
    LINK_PROPOSED = "identity.link.proposed.v1";
    LINK_REVIEW_OPENED = "identity.link.review_opened.v1";
    MERGE_APPROVED = "identity.merge.approved.v1";
    MERGE_REJECTED = "identity.merge.rejected.v1";
    MERGE_REVERTED = "identity.merge.reverted.v1";
    OFFER_CREATED = "offer.offer.created.v1";
    SEQUENCE_TEMPLATE_CREATED = "sequence.template.created.v1";
    SEQUENCE_CREATED = "sequence.sequence.created.v1";
    HANDOFF_CREATED = "handoff.handoff.created.v1";
    HANDOFF_ACCEPTED = "handoff.handoff.accepted.v1";
    HANDOFF_DECLINED = "handoff.handoff.declined.v1";
    HANDOFF_COMPLETED = "handoff.handoff.completed.v1";
    INCIDENT_OPENED = "incident.incident.opened.v1";
    INCIDENT_ACKNOWLEDGED = "incident.incident.acknowledged.v1";
    INCIDENT_ESCALATED = "incident.incident.escalated.v1";
    INCIDENT_RESOLVED = "incident.incident.resolved.v1";
    ADDRESS_SUPPRESSED = "deliverability.address.suppressed.v1";
    BOUNCE_PROCESSED = "deliverability.bounce.processed.v1";
    COMPLAINT_PROCESSED = "deliverability.complaint.processed.v1";
    NOTIFICATION_SENT = "notification.message.sent.v1";
    NOTIFICATION_DELIVERED = "notification.message.delivered.v1";
    NOTIFICATION_FAILED = "notification.message.failed.v1";
    QUIET_HOURS_SET = "notification.quiet_hours.set.v1";
    CRM_CONTACT_CREATED = "crm.contact.created.v1";
    CRM_LEAD_CREATED = "crm.lead.created.v1";
    CRM_CALL_LOGGED = "crm.call.logged.v1";
    CRM_CALL_MISSED = "crm.call.missed.v1";
    CAMPAIGN_CREATED = "campaign.campaign.created.v1";
    CAMPAIGN_JOURNEY_CREATED = "campaign.journey.created.v1";
    CONTENT_ITEM_CREATED = "content.item.created.v1";
    CONTENT_ITEM_VERSIONED = "content.item.versioned.v1";
    CONTENT_ITEM_ARCHIVED = "content.item.archived.v1";
    COVERAGE_RULE_SET = "assignment.coverage_rule.set.v1";
    SOCIAL_HANDLE_AUTHORISED = "social.handle.authorised.v1";
    LEAD_SCORING_MODEL_CREATED = "crm.scoring_model.created.v1";
    LEAD_SCORING_MODEL_ACTIVATED = "crm.scoring_model.activated.v1";
    ENGAGEMENT_ENCOUNTER_OPENED = "engagement.encounter.opened.v1";
    ENGAGEMENT_ENCOUNTER_CLOSED = "engagement.encounter.closed.v1";
    ENGAGEMENT_ENCOUNTER_SEALED = "engagement.encounter.sealed.v1";
    EVENT_CREATED = "event.event.created.v1";
    EVENT_TICKET_ISSUED = "event.ticket.issued.v1";
    EVENT_TICKET_CHECKED_IN = "event.ticket.checked_in.v1";
    EVENT_TICKET_VOIDED = "event.ticket.voided.v1";
    SERVICE_REQUEST_QUEUE_CREATED = "service-request.queue.created.v1";
    SERVICE_REQUEST_OPENED = "service-request.request.opened.v1";
    SERVICE_REQUEST_CLOSED = "service-request.request.closed.v1";
    SLA_POLICY_CREATED = "sla.policy.created.v1";
    SLA_RUNG_CREATED = "sla.rung.created.v1";
    SLA_CLOCK_STARTED = "sla.clock.started.v1";
    SLA_CLOCK_STOPPED = "sla.clock.stopped.v1";
    SLA_CLOCK_BREACHED = "sla.clock.breached.v1";
    CONNECTOR_SYNC_COMPLETED = "connector.sync.completed.v1";
    CONNECTOR_SYNC_FAILED = "connector.sync.failed.v1";
    CONNECTOR_ITEM_DEAD_LETTERED = "connector.item.dead_lettered.v1";
    CONNECTOR_ITEM_REPLAYED = "connector.item.replayed.v1";
    SCHEDULING_CONNECTION_CREATED = "scheduling.connection.created.v1";
    SCHEDULING_APPOINTMENT_BOOKED = "scheduling.appointment.booked.v1";
    SCHEDULING_APPOINTMENT_RESCHEDULED = "scheduling.appointment.rescheduled.v1";
    SCHEDULING_APPOINTMENT_CANCELLED = "scheduling.appointment.cancelled.v1";
    SCHEDULING_CALENDAR_PUSHED = "scheduling.calendar.pushed.v1";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_emitted_type_is_in_the_baseline() {
        let baseline = crate::audit::registry::baseline();
        let unknown: Vec<&str> = ALL.iter().copied().filter(|t| !baseline.contains(t)).collect();
        assert!(unknown.is_empty(), "event types missing from baseline.txt: {unknown:?}");
    }

    #[test]
    fn every_type_has_one_constant() {
        let mut seen = std::collections::HashSet::new();
        let twice: Vec<&str> = ALL.iter().copied().filter(|t| !seen.insert(*t)).collect();
        assert!(twice.is_empty(), "event types with two constants: {twice:?}");
    }
}
