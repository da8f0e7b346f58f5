//! sdk-parsing: contact extraction over a batch of up to 100 captures
//! (an email, a vCard, free text, a signature, a scanned card). Each
//! capture is read on its own (`extract.rs` says how): a malformed one gets
//! its errors in its own result and the others are read all the same.
//! Nothing is stored: the batch records one event, with counts only.

mod extract;

use hub_kernel::prelude::*;
use phonenumber::country::Id;

use extract::{Contact, KINDS, Rejected};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(extract_contacts))
}

const MAX_CAPTURES: usize = 100;
/// The longest `raw` a capture may have, in bytes.
const MAX_RAW_BYTES: usize = 64 * 1024;

#[derive(Deserialize, ToSchema)]
#[schema(as = ParsingBatch)]
struct Batch {
    /// The captures, each `{ source_kind, raw, default_region? }`:
    /// `source_kind` one of `email`, `vcard`, `text`, `signature`, `ocr`;
    /// `raw` the captured text, at most 64 KiB; `default_region` the
    /// batch's when absent. Each capture is checked on its own: one that is
    /// malformed (or not an object) gets its problems in its result
    /// (`ParsedCapture.errors`), not a 400, and the others are read.
    #[schema(value_type = Vec<Value>, min_items = 1, max_items = 100)]
    captures: Vec<Value>,
    /// ISO 3166-1 alpha-2 region of the numbers written without a country
    /// code, for every capture that names none.
    #[schema(example = "NL")]
    default_region: Option<String>,
}

/// What was read of one capture.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ParsedCapture)]
struct CaptureResult {
    /// The capture's position in the batch, from 0.
    index: usize,
    source_kind: Option<String>,
    contacts: Vec<Contact>,
    rejected_phones: Vec<Rejected>,
    /// Why the capture was not read; empty when it was.
    errors: Vec<String>,
}

/// What was read of a batch.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ParsingOutcome)]
struct Outcome {
    /// One result per capture, in the batch's order.
    captures: Vec<CaptureResult>,
}

/// A region code: two letters libphonenumber knows, in either case.
fn region(value: &Value) -> Result<Id, String> {
    value
        .as_str()
        .filter(|s| s.len() == 2)
        .and_then(|s| s.to_ascii_uppercase().parse().ok())
        .ok_or_else(|| "default_region must be an ISO 3166-1 alpha-2 code".into())
}

fn read(index: usize, capture: &Value, batch_region: Option<Id>) -> CaptureResult {
    let mut result = CaptureResult { index, source_kind: None, contacts: vec![], rejected_phones: vec![], errors: vec![] };
    let Some(fields) = capture.as_object() else {
        result.errors.push("capture must be an object".into());
        return result;
    };
    let text = |name: &str| match fields.get(name) {
        None | Some(Value::Null) => Err(format!("{name} is required")),
        Some(Value::String(s)) if s.trim().is_empty() => Err(format!("{name} is required")),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(format!("{name} must be a string")),
    };
    let kind = text("source_kind").and_then(|k| if KINDS.contains(&k) { Ok(k) } else { Err(format!("source_kind must be one of: {}", KINDS.join(", "))) });
    let raw = text("raw").and_then(|r| if r.len() > MAX_RAW_BYTES { Err(format!("raw must be at most {MAX_RAW_BYTES} bytes")) } else { Ok(r) });
    let own_region = match fields.get("default_region") {
        None | Some(Value::Null) => Ok(batch_region),
        Some(v) => region(v).map(Some),
    };
    result.source_kind = fields.get("source_kind").and_then(Value::as_str).map(str::to_string);
    match (kind, raw, own_region) {
        (Ok(kind), Ok(raw), Ok(region)) => {
            let found = extract::extract(kind, raw, region);
            (result.contacts, result.rejected_phones) = (found.contacts, found.rejected_phones);
        }
        (kind, raw, region) => result.errors.extend([kind.err(), raw.err(), region.err()].into_iter().flatten()),
    }
    result
}

/// Extracts the contacts of each capture: names, email addresses and
/// phone numbers in E.164. 200 whenever the batch itself is well formed.
#[utoipa::path(post, path = "/api/parsing/contacts/extract", tag = "sdk-parsing", request_body = Batch,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"captures": [{"source_kind": "text", "raw": "Ada Lovelace <ada@example.com> +31 20 123 4567"}], "default_region": "NL"}}))),
    responses((status = 200, description = "one result per capture", body = Data<Outcome>)))]
async fn extract_contacts(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Batch>) -> ApiResult<Data<Outcome>> {
    let body = body.checked()?;
    let captures = body.captures;
    debug_assert!((1..=MAX_CAPTURES).contains(&captures.len()), "the schema bounds the batch");
    let batch_region = match Check::optional(&body.default_region) {
        Some(r) => Some(region(&Value::String(r)).map_err(ApiError::invalid)?),
        None => None,
    };
    // Up to 20,000 phone numbers parsed: work for a blocking thread.
    let captures: Vec<CaptureResult> = tokio::task::spawn_blocking(move || captures.iter().enumerate().map(|(i, c)| read(i, c, batch_region)).collect())
        .await
        .map_err(|e| ApiError::Internal(e.into()))?;
    let count = |f: fn(&Contact) -> usize| captures.iter().flat_map(|c| &c.contacts).map(f).sum::<usize>();
    let payload = json!({
        "captures": captures.len(),
        "failed": captures.iter().filter(|c| !c.errors.is_empty()).count(),
        "contacts": count(|_| 1),
        "emails": count(|c| c.emails.len()),
        "phones": count(|c| c.phones.len()),
        "rejected_phones": captures.iter().map(|c| c.rejected_phones.len()).sum::<usize>(),
    });
    let mut tx = state.db.begin().await?;
    audit::record(&mut tx, &ctx, events::PARSING_BATCH_COMPLETED, payload).await?;
    tx.commit().await?;
    Ok(ok(Outcome { captures }))
}
