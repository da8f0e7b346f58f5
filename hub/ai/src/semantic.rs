//! semantic-service: the cross-domain bridges. A bridge is a place where
//! the events of one domain of the vocabulary are consumed by a group of
//! another: what that group reads, and why. The list is the hub's own
//! wiring, kept here as data; a test checks every event type it names
//! against the baseline and every group against the catalogue, so it
//! cannot drift from what exists.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// One bridge.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SemanticBridge)]
pub struct Bridge {
    pub bridge_id: &'static str,
    /// The domain whose events cross (`*`: every domain).
    pub from_domain: &'static str,
    /// The event types consumed (`*`: every type, as subscribed).
    pub event_types: &'static [&'static str],
    /// The group that consumes them.
    pub to_group: &'static str,
    /// What the consumer does with them.
    pub purpose: &'static str,
}

pub const BRIDGES: &[Bridge] = &[
    Bridge {
        bridge_id: "agent-runs-to-trace-exports",
        from_domain: "agent",
        event_types: &["agent.run.started.v1"],
        to_group: "sdk-trace",
        purpose: "a trace export carries, for each run of the trace, the hash-chained audit entry that recorded its start",
    },
    Bridge {
        bridge_id: "events-to-webhooks",
        from_domain: "*",
        event_types: &["*"],
        to_group: "sdk-webhook",
        purpose: "every event of a type an endpoint subscribes to is delivered to it, signed, from the event's own transaction",
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

    #[test]
    fn every_bridge_names_event_types_of_the_baseline() {
        let baseline = hub_kernel::audit::registry::baseline();
        for b in BRIDGES {
            for t in b.event_types.iter().filter(|t| **t != "*") {
                assert!(baseline.contains(t), "{}: {t} is not in the baseline", b.bridge_id);
            }
        }
        let ids: std::collections::HashSet<_> = BRIDGES.iter().map(|b| b.bridge_id).collect();
        assert_eq!(ids.len(), BRIDGES.len(), "bridge ids are unique");
    }
}
