//! Extraction schemas, the operator's half: publishing the platform's
//! default schema of a document kind, which every tenant without an
//! active schema of its own for the kind reads (sdk-taxonomy). The
//! schemas and their rules are the ai area's
//! (`taxonomy::publish_default_as`); this module is the operator's door to
//! them. Not in the operator document: see docs/compatibility.md,
//! "Lifecycle routes (issue 37)".

use hub_ai::taxonomy::{self, NewSchema, Schema};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(publish_default))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewExtractionSchema)]
struct NewDefault {
    #[serde(flatten)]
    schema: NewSchema,
    /// Who publishes it (kept as `created_by`).
    #[schema(min_length = 1, max_length = 200)]
    operator_id: String,
}

/// Publishes the platform's next default schema version for a document
/// kind (a kind that had none gets version 1) and makes it the platform's
/// active one, the previous default retired: 201 the schema, `source`
/// `platform`. A tenant with an active schema of its own for the kind
/// keeps reading its own. Every problem of the body in one 400, as the
/// tenant's publication. Event `taxonomy.schema.published.v1` in the
/// platform chain, the operator credential as actor.
#[utoipa::path(post, path = "/admin/taxonomy/extraction-schemas", tag = "admin-taxonomy", request_body = NewDefault,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "document_kind": "race-{unique}", "fields": [{ "name": "n", "type": "string" }], "operator_id": "ops-race" } }))),
    responses((status = 201, description = "the platform's default, active", body = Data<Schema>)))]
async fn publish_default(State(state): State<AppState>, Operator(who): Operator, body: Body<NewDefault>) -> ApiResult<Created<Schema>> {
    let body = body.checked()?;
    Ok(created(taxonomy::publish_default_as(&state.db, &who, &body.schema, body.operator_id.trim()).await?))
}
