//! Who writes a layer of the platform's configuration (feature flags,
//! config values): a tenant credential, its own tenant's layer; or the
//! platform operator, the platform's layer (rows with no tenant, which
//! every tenant reads after its own). The tenant routes and the operator's
//! `/admin` routes share one implementation, parameterised by the writer.

use hub_kernel::prelude::*;

/// The author of a write and the layer it writes.
#[derive(Clone, Copy)]
pub enum Writer<'a> {
    /// The caller's tenant's layer.
    Tenant(&'a TenantCtx),
    /// The platform's layer, the operator credential's name as actor.
    Operator(&'a str),
}

impl Writer<'_> {
    /// The tenant whose layer is written; None: the platform's.
    pub fn tenant_id(&self) -> Option<&str> {
        match self {
            Writer::Tenant(ctx) => Some(&ctx.tenant_id),
            Writer::Operator(_) => None,
        }
    }

    /// The layer as the rows' `COALESCE(tenant_id, '')` holds it: the
    /// tenant id, or `''` for the platform's.
    pub fn owner(&self) -> &str {
        self.tenant_id().unwrap_or("")
    }

    /// Who a row records as its author: the person or persona of a tenant
    /// credential, the operator credential's name.
    pub fn actor_id(&self) -> &str {
        match self {
            Writer::Tenant(ctx) => audit::actor_of(ctx).1,
            Writer::Operator(who) => who,
        }
    }

    /// Appends the write's event: in the tenant's chain for a tenant, in
    /// the platform chain (the operator as actor) for the operator.
    pub async fn record(&self, tx: &mut Tx, event_type: &str, payload: Value) -> ApiResult<()> {
        match self {
            Writer::Tenant(ctx) => audit::record(tx, ctx, event_type, payload).await?,
            Writer::Operator(who) => audit::record_operator(tx, who, event_type, payload).await?,
        };
        Ok(())
    }
}
