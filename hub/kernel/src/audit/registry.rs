//! The closed event vocabulary: the platform baseline (a data file compiled
//! into the hub), each tenant's registered types, the name format of
//! "Events" 2, and the enumerations every type carries.

use std::{collections::HashMap, sync::LazyLock};

use serde::Serialize;
use sqlx::Row;

use crate::error::ApiResult;

pub const RETENTION_CLASSES: &[&str] = &["transient", "operational", "regulated"];
pub const CONFLICT_POLICIES: &[&str] = &["crdt", "lww", "merge", "event-sourcing", "human-review"];
/// The documents name only the default `active`; the other two let a type
/// be phased out without being removed (the vocabulary is additive-only).
pub const SCHEMA_STATES: &[&str] = &["active", "deprecated", "retired"];
/// The documents name only the default `none`.
pub const COMPACTION_POLICIES: &[&str] = &["none", "snapshot", "keep-latest"];

/// Metadata of one event type, platform or tenant.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct EventType {
    pub event_type: String,
    pub retention_class: String,
    pub conflict_policy: String,
    pub schema_state: String,
    pub compaction_policy: String,
    pub schema_version: i64,
    /// `platform` or `tenant`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// The baseline in file order, and an index by name.
pub struct Baseline {
    pub types: Vec<EventType>,
    index: HashMap<String, usize>,
}

impl Baseline {
    pub fn get(&self, name: &str) -> Option<&EventType> {
        self.index.get(name).map(|&i| &self.types[i])
    }

    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The distinct domains (first name segment).
    pub fn domains(&self) -> std::collections::BTreeSet<&str> {
        self.types.iter().map(|t| t.event_type.split('.').next().unwrap_or_default()).collect()
    }
}

/// The data file; a malformed line is a build defect, caught by the unit
/// test below and by the first use at start-up.
static BASELINE: LazyLock<Baseline> = LazyLock::new(|| parse_baseline(include_str!("baseline.txt")).expect("baseline.txt is well-formed"));

pub fn baseline() -> &'static Baseline {
    &BASELINE
}

fn parse_baseline(text: &str) -> Result<Baseline, String> {
    let mut types = Vec::new();
    let mut index = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, retention, conflict] = fields.as_slice() else {
            return Err(format!("line {}: expected `<event_type> <retention_class> <conflict_policy>`", n + 1));
        };
        if !valid_name(name) || !RETENTION_CLASSES.contains(retention) || !CONFLICT_POLICIES.contains(conflict) {
            return Err(format!("line {}: invalid entry `{line}`", n + 1));
        }
        if index.insert(name.to_string(), types.len()).is_some() {
            return Err(format!("line {}: duplicate `{name}`", n + 1));
        }
        types.push(EventType {
            event_type: name.to_string(),
            retention_class: retention.to_string(),
            conflict_policy: conflict.to_string(),
            schema_state: "active".into(),
            compaction_policy: "none".into(),
            schema_version: 1,
            source: "platform",
            created_at: None,
        });
    }
    Ok(Baseline { types, index })
}

/// "Events" 2: `<domain>.<entity>.<verb>.v<N>`, lowercase, `-` or `_`
/// allowed inside a segment, at least two segments before the version.
pub fn valid_name(name: &str) -> bool {
    if name.len() > 200 {
        return false;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let Some((version, segments)) = parts.split_last() else { return false };
    let version_ok = version.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0'));
    version_ok && segments.len() >= 2 && segments.iter().all(|s| valid_segment(s))
}

fn valid_segment(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else { return false };
    first.is_ascii_lowercase()
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_')
        && !bytes.windows(2).any(|w| matches!(w, [b'-' | b'_', b'-' | b'_']))
}

const TENANT_SELECT: &str = "SELECT event_type, retention_class, conflict_policy, schema_state, compaction_policy, schema_version, created_at \
     FROM audit_event_type";

pub(crate) fn tenant_type_from_row(row: &sqlx::any::AnyRow) -> Result<EventType, sqlx::Error> {
    Ok(EventType {
        event_type: row.try_get("event_type")?,
        retention_class: row.try_get("retention_class")?,
        conflict_policy: row.try_get("conflict_policy")?,
        schema_state: row.try_get("schema_state")?,
        compaction_policy: row.try_get("compaction_policy")?,
        schema_version: row.try_get("schema_version")?,
        source: "tenant",
        created_at: row.try_get("created_at")?,
    })
}

/// The type `name` as tenant `tenant_id` sees it: the baseline first (a
/// tenant cannot shadow a platform type), then the tenant's own.
pub async fn lookup<'e, E>(exec: E, tenant_id: &str, name: &str) -> ApiResult<Option<EventType>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    if let Some(t) = baseline().get(name) {
        return Ok(Some(t.clone()));
    }
    if !valid_name(name) {
        return Ok(None);
    }
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("{TENANT_SELECT} WHERE tenant_id = $1 AND event_type = $2")))
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(exec)
        .await?;
    Ok(match row {
        Some(r) => Some(tenant_type_from_row(&r)?),
        None => None,
    })
}

/// Every type registered by one tenant, by name.
pub async fn tenant_types(pool: &sqlx::AnyPool, tenant_id: &str) -> ApiResult<Vec<EventType>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("{TENANT_SELECT} WHERE tenant_id = $1 ORDER BY event_type"))).bind(tenant_id).fetch_all(pool).await?;
    Ok(rows.iter().map(tenant_type_from_row).collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts the file's header states: "N types in M owned domains".
    fn stated_counts() -> (usize, usize) {
        let header = include_str!("baseline.txt").lines().next().unwrap();
        let numbers: Vec<usize> = header.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        assert_eq!(numbers.len(), 2, "the header states two counts: {header}");
        (numbers[0], numbers[1])
    }

    #[test]
    fn the_baseline_has_the_types_and_domains_its_header_states_all_well_formed() {
        let b = baseline();
        let (types, domains) = stated_counts();
        assert_eq!(b.types.len(), types);
        assert_eq!(b.domains().len(), domains);
        assert!(b.types.iter().all(|t| valid_name(&t.event_type)));
    }

    /// Types the catalogue's groups emit that the document's baseline lacks
    /// (each recorded in docs/compatibility.md).
    const ADDED: &[&str] = &[
        "crm.deal.created.v1",
        "crm.deal.updated.v1",
        "crm.deal.won.v1",
        "crm.deal.lost.v1",
        "sequence.enrollment.cancelled.v1",
        "ai-gateway.route.deleted.v1",
        "import.template.activated.v1",
        "import.template.deactivated.v1",
        "crm.scoring_model.deactivated.v1",
        "tenant.residency_node.created.v1",
        "tenant.residency_node.updated.v1",
        "tenant.residency_node.deleted.v1",
        "tenant.membership.updated.v1",
        "identity.persona.updated.v1",
        "identity.role_template.updated.v1",
        "identity.role_template.deleted.v1",
        "assignment.rule_set.published.v1",
        "assignment.rule_set.activated.v1",
        "assignment.workload.updated.v1",
        "assignment.simulation.completed.v1",
        "webhook.endpoint.updated.v1",
        "webhook.endpoint.deleted.v1",
        "webhook.inbound_secret.set.v1",
        "approval.step.decided.v1",
        "tenant.tenant.suspended.v1",
        "tenant.tenant.resumed.v1",
        "identity.link.proposed.v1",
        "identity.link.review_opened.v1",
        "identity.merge.reverted.v1",
        "sequence.sequence.created.v1",
        "notification.quiet_hours.set.v1",
        "assignment.coverage_rule.set.v1",
        "crm.scoring_model.created.v1",
        "crm.scoring_model.activated.v1",
        "tenant.active_active_profile.created.v1",
        "tenant.failover_drill.completed.v1",
        "security.sovereign_region.registered.v1",
        "security.sovereign_attestation.recorded.v1",
        "security.sovereign_bundle.released.v1",
        "security.sovereign_bundle.applied.v1",
        "security.sovereign_leak.reported.v1",
        "security.onprem_install.registered.v1",
        "security.onprem_billing_report.generated.v1",
        "security.onprem_bundle.applied.v1",
        "ingest.storm.ingested.v1",
        "audit.lineage.backfilled.v1",
        "security.federation_profile.created.v1",
        "security.byok.rotated.v1",
        "event.event.created.v1",
        "sla.policy.created.v1",
        "sla.rung.created.v1",
        "sla.clock.stopped.v1",
        "scheduling.connection.created.v1",
        "ai-gateway.route.set.v1",
        "device.permission_snapshot.recorded.v1",
        "data-credits.credit.granted.v1",
        "data-credits.price.set.v1",
        "agent.run.cancelled.v1",
        "sla.policy.updated.v1",
        "sla.rung.deleted.v1",
        "social.handle.updated.v1",
        "content.item.updated.v1",
        "content.item.restored.v1",
        "service-request.request.updated.v1",
        "service-request.request.reopened.v1",
        "service-request.queue.updated.v1",
        "asset.asset.retired.v1",
        "command.command.cancelled.v1",
        "feature-flag.flag.updated.v1",
        "feature-flag.flag.deleted.v1",
        "device.person.suspended.v1",
        "audit.event_type.updated.v1",
        "approval.route.retired.v1",
        "secrets.reference.deleted.v1",
        "secrets.reference.updated.v1",
        "policy.bundle.deactivated.v1",
        "crm.contact.erased.v1",
        "crm.lead.updated.v1",
        "crm.lead.deleted.v1",
        "identity.api_key.updated.v1",
        "identity.application.updated.v1",
        "identity.application.enabled.v1",
        "tenant.offboarding.cancelled.v1",
        "tenant.offboarding.updated.v1",
        "profile.band.cleared.v1",
        "consent.purpose.retired.v1",
        "data-rights.request.cancelled.v1",
        "approval.request.cancelled.v1",
        "campaign.campaign.updated.v1",
        "campaign.campaign.archived.v1",
        "campaign.journey.updated.v1",
        "campaign.journey.deleted.v1",
        "event.event.updated.v1",
        "incident.incident.updated.v1",
        "incident.incident.assigned.v1",
        "incident.note.added.v1",
        "offer.offer.activated.v1",
        "deliverability.address.unsuppressed.v1",
        "notification.quiet_hours.cleared.v1",
        "scheduling.appointment.updated.v1",
        "scheduling.connection.updated.v1",
        "scheduling.connection.deleted.v1",
        "sequence.template.updated.v1",
        "sequence.sequence.updated.v1",
        "sequence.sequence.archived.v1",
        "billing.hardcap.set.v1",
        "billing.hardcap.removed.v1",
        "taxonomy.schema.activated.v1",
        "payment.method.detached.v1",
        "analytics.build.deleted.v1",
        "device.idp_claim.removed.v1",
        "assignment.coverage_rule.removed.v1",
        "engagement.encounter.updated.v1",
        "geo.address.deleted.v1",
        "webhook.inbound_secret.deleted.v1",
        "webhook.endpoint.tested.v1",
        "workflow.definition.updated.v1",
    ];

    #[test]
    fn the_header_states_the_documents_counts() {
        // The tenant document: 227 types in 59 domains (RULINGS 3), and ours.
        assert_eq!(stated_counts(), (227 + ADDED.len(), 59));
        assert!(ADDED.iter().all(|t| baseline().contains(t)));
    }

    #[test]
    fn the_baseline_holds_every_event_type_the_documents_name() {
        for name in [
            "agent.run.started.v1",
            "crm.call.logged.v1",
            "crm.call.missed.v1",
            "trace.export.requested.v1",
            "trace.export.ready.v1",
            "ai-gateway.complete.v1",
            "parsing.field.extracted.v1",
            "recommendation.suggestion.generated.v1",
            "semantic.intent.planned.v1",
            "security.admin_ops_token.issued.v1",
            "security.admin_ops_token.revoked.v1",
        ] {
            assert!(baseline().contains(name), "{name}");
        }
        assert_eq!(baseline().get("agent.run.started.v1").unwrap().retention_class, "regulated");
        assert_eq!(baseline().get("trace.export.ready.v1").unwrap().retention_class, "operational");
    }

    #[test]
    fn names_follow_the_documented_format() {
        for good in ["crm.call.logged.v1", "ai-gateway.complete.v1", "a.b.v12", "my_app.order-line.shipped.v2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "crm.call.logged",
            "crm.v1",
            "Crm.call.logged.v1",
            "crm..logged.v1",
            "crm.call.logged.v0",
            "crm.call.logged.V1",
            "crm.-call.logged.v1",
            "crm.call_.logged.v1",
            "crm.call.logged.v1x",
            "crm.call logged.v1",
            ".crm.call.v1",
            "crm.call.v01",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
