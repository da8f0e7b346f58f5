//! semantic-service: the cross-domain bridges. A bridge is a place where
//! objects of one domain of the vocabulary are reached by a group of
//! another, and how (`access_mode`). The list is the hub's own wiring,
//! kept here as data; a test checks every object type it names against
//! the baseline, so it cannot name a domain or an object that does not
//! exist. An object type id is `<domain>.<resource>`: for objects that have
//! events, the first two parts of their event types (`agent.run` for
//! `agent.run.started.v1`). The one exception is `audit.entry`, an entry
//! of a tenant's audit chain: the entries are the events themselves
//! (every `<type>.v<N>` recorded), so no event type names them.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

stored_enum! {
    /// How the receiving side reaches the objects of the other domain:
    /// `read`, it reads their stored records when it needs them;
    /// `subscribe`, they are handed to it as their events happen.
    #[schema(as = SemanticBridgeAccessMode)]
    pub enum AccessMode { Read = "read", Subscribe = "subscribe" }
}

/// One bridge, with the fields the tenant document names.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SemanticBridge)]
pub struct Bridge {
    pub bridge_id: &'static str,
    /// The object type reached: `<domain>.<resource>`.
    pub from_object_type_id: &'static str,
    /// The object type that reaches it: `<domain>.<resource>`.
    pub to_object_type_id: &'static str,
    pub access_mode: AccessMode,
    /// Whether crossing needs the consent of another tenant: false for
    /// every bridge of the hub, each of which stays inside one tenant.
    pub requires_cross_tenant_consent: bool,
}

pub const BRIDGES: &[Bridge] = &[
    // A trace export carries, for each agent run of the trace, the
    // hash-chained audit entry that recorded its start
    // (`agent.run.started.v1`), read when the export is made.
    Bridge {
        bridge_id: "agent-runs-to-trace-exports",
        from_object_type_id: "agent.run",
        to_object_type_id: "trace.export",
        access_mode: AccessMode::Read,
        requires_cross_tenant_consent: false,
    },
    // Every event (an audit entry of the tenant's chain) of a type an
    // endpoint subscribes to becomes a signed delivery, from the event's
    // own transaction.
    Bridge {
        bridge_id: "events-to-webhooks",
        from_object_type_id: "audit.entry",
        to_object_type_id: "webhook.delivery",
        access_mode: AccessMode::Subscribe,
        requires_cross_tenant_consent: false,
    },
];

/// Every cross-domain bridge (unpaginated).
#[utoipa::path(get, path = "/api/semantic/bridges", tag = "semantic-service",
    responses((status = 200, description = "every bridge", body = Data<Vec<Bridge>>)))]
async fn list(Tenant(_): Tenant) -> ApiResult<Data<Vec<Bridge>>> {
    Ok(ok(BRIDGES.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The object types a bridge names that have no event type of their
    /// own (see the module's documentation).
    const EVENTLESS: [&str; 1] = ["audit.entry"];

    #[test]
    fn every_bridge_names_object_types_of_domains_of_the_baseline() {
        let baseline = hub_kernel::audit::registry::baseline();
        for b in BRIDGES {
            for t in [b.from_object_type_id, b.to_object_type_id] {
                let parts: Vec<&str> = t.split('.').collect();
                assert!(parts.len() == 2 && parts.iter().all(|p| !p.is_empty()), "{}: {t} is <domain>.<resource>", b.bridge_id);
                assert!(baseline.domains().contains(parts[0]), "{}: {t}: no domain {} in the baseline", b.bridge_id, parts[0]);
                // The objects' events are the baseline's types under the id.
                let prefix = format!("{t}.");
                let typed = baseline.types.iter().any(|e| e.event_type.starts_with(&prefix));
                assert!(typed || EVENTLESS.contains(&t), "{}: {t}: no event type {prefix}* in the baseline", b.bridge_id);
                assert!(!(typed && EVENTLESS.contains(&t)), "{t} has event types: it is not eventless");
            }
            assert_ne!(b.from_object_type_id, b.to_object_type_id, "{}", b.bridge_id);
        }
        // The run whose start a trace export reads has that event.
        assert!(baseline.contains("agent.run.started.v1"));
        let ids: std::collections::HashSet<_> = BRIDGES.iter().map(|b| b.bridge_id).collect();
        assert_eq!(ids.len(), BRIDGES.len(), "bridge ids are unique");
    }
}
