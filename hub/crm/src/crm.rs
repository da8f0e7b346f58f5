//! sdk-crm: contacts (each email address names one contact of a tenant),
//! leads (linked to a contact or not), logged calls of a contact or lead,
//! and a contact's timeline: its creation, its leads and its calls, newest
//! first.

use phonenumber::Mode;

use hub_identity::personas;
use hub_kernel::{db::counts, extract, prelude::*};
use serde::de::DeserializeOwned;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_contact, list_contacts))
        .routes(routes!(get_contact, update_contact_route, erase_contact))
        .routes(routes!(timeline))
        .routes(routes!(create_lead, list_leads))
        .routes(routes!(get_lead, update_lead_route, delete_lead))
        .routes(routes!(log_call, list_calls))
        .routes(routes!(get_call))
}

stored_enum! {
    /// Where a lead is in its qualification.
    #[schema(as = CrmLeadStatus)]
    pub enum LeadStatus { New = "new", Contacted = "contacted", Qualified = "qualified", Unqualified = "unqualified" }
}

stored_enum! {
    /// Who placed a call.
    #[schema(as = CrmCallDirection)]
    pub enum Direction { Inbound = "inbound", Outbound = "outbound" }
}

/// How a call ended, and which ends are missed calls: the kernel's, shared
/// with the voice webhook that logs calls too.
pub use hub_kernel::types::CallDisposition as Disposition;

stored_enum! {
    /// What a touch of a contact's timeline is.
    #[schema(as = CrmTouchKind)]
    pub enum TouchKind { ContactCreated = "contact_created", LeadCreated = "lead_created", Call = "call" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CrmContact)]
pub struct Contact {
    pub contact_id: Id,
    name: String,
    /// Lowercased; each names this contact only, within the tenant.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    emails: JsonText,
    /// E.164 numbers.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    phones: JsonText,
    company: Option<String>,
    owner_persona_id: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    attributes: JsonText,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const CONTACT_COLUMNS: &str = "contact_id, name, emails, phones, company, owner_persona_id, attributes, created_by, created_at, updated_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CrmLead)]
pub struct Lead {
    pub lead_id: Id,
    contact_id: Option<Id>,
    name: String,
    company: Option<String>,
    source: Option<String>,
    status: LeadStatus,
    owner_persona_id: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    attributes: JsonText,
    created_by: String,
    created_at: Timestamp,
}

const LEAD_COLUMNS: &str = "lead_id, contact_id, name, company, source, status, owner_persona_id, attributes, created_by, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CrmCall)]
struct Call {
    call_id: Id,
    contact_id: Option<Id>,
    lead_id: Option<Id>,
    direction: Direction,
    disposition: Disposition,
    duration_seconds: i64,
    phone_number: Option<String>,
    recording_url: Option<String>,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    recording_consent: Flag,
    provider_call_id: Option<String>,
    occurred_at: Timestamp,
    logged_by: String,
    created_at: Timestamp,
}

const CALL_COLUMNS: &str = "call_id, contact_id, lead_id, direction, disposition, duration_seconds, phone_number, recording_url, recording_consent, \
                            provider_call_id, occurred_at, logged_by, created_at";

/// One touch of a contact's timeline.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = CrmTouch)]
struct Touch {
    kind: TouchKind,
    /// The contact, lead or call.
    ref_id: Id,
    occurred_at: Timestamp,
    /// A call's direction, disposition and duration (null otherwise).
    direction: Option<Direction>,
    disposition: Option<Disposition>,
    duration_seconds: Option<i64>,
}

/// The touches of every contact: filtered by tenant and contact, newest first.
const TIMELINE: Listing = Listing {
    table: "(SELECT tenant_id, contact_id, 'contact_created' AS kind, contact_id AS ref_id, created_at AS occurred_at, CAST(NULL AS TEXT) AS direction, \
            CAST(NULL AS TEXT) AS disposition, CAST(NULL AS INTEGER) AS duration_seconds FROM crm_contact \
            UNION ALL SELECT tenant_id, contact_id, 'lead_created', lead_id, created_at, NULL, NULL, NULL FROM crm_lead WHERE contact_id IS NOT NULL \
            UNION ALL SELECT tenant_id, contact_id, 'call', call_id, occurred_at, direction, disposition, duration_seconds FROM crm_call \
            WHERE contact_id IS NOT NULL) AS touch",
    columns: "kind, ref_id, occurred_at, direction, disposition, duration_seconds",
    filter: "tenant_id = $1 AND contact_id = $2",
    order: "occurred_at DESC, ref_id DESC",
};

/// The contacts, newest first (erased ones are no contacts any more);
/// `list_contacts` composes the filter.
const CONTACTS: Listing =
    Listing { table: "crm_contact", columns: CONTACT_COLUMNS, filter: "tenant_id = $1 AND erased_at IS NULL", order: "created_at DESC, contact_id DESC" };

/// The name of a tenant's count of contacts (`hub_kernel::db::counts`).
const ALL_CONTACTS: &str = "crm_contact";

/// The counts by owner and by company that a contact with this owner and
/// company is in, each with `delta`.
fn contact_counts(owner: Option<&str>, company: Option<&str>, delta: i64) -> Vec<(String, i64)> {
    let mut counts = Vec::new();
    if let Some(owner) = owner {
        counts.push((format!("{ALL_CONTACTS} owner {owner}"), delta));
    }
    if let Some(company) = company {
        counts.push((format!("{ALL_CONTACTS} company {company}"), delta));
    }
    counts
}

/// Whether `s` is a phone number written in E.164 (`+` and its digits) that
/// libphonenumber's metadata knows as valid.
fn is_e164(s: &str) -> bool {
    s.starts_with('+') && phonenumber::parse(None, s).is_ok_and(|n| n.is_valid() && n.format().mode(Mode::E164).to_string() == s)
}

/// A plausible email address: one `@`, a local part, a dotted domain, no
/// space; at most 254 characters.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else { return false };
    s.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(char::is_whitespace)
}

/// An address list's name, the form of each address and its description.
type AddressList = (&'static str, fn(&str) -> bool, &'static str);

/// The address lists of a contact, with the form each address must have.
const ADDRESSES: [AddressList; 2] = [("emails", is_email, "an email address"), ("phones", is_e164, "an E.164 phone number (e.g. +14155550123)")];

/// A list of strings (absent: empty), each trimmed and checked by
/// `valid`, repeats dropped.
fn strings(check: &mut Check, name: &str, value: Option<&[String]>, valid: fn(&str) -> bool, what: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, item) in value.unwrap_or_default().iter().enumerate() {
        match item.trim() {
            s if valid(s) => {
                if !out.iter().any(|o| o == s) {
                    out.push(s.to_string());
                }
            }
            _ => check.fail(format!("{name}[{i}] must be {what}")),
        }
    }
    out
}

async fn owner_of_tenant(tx: &mut Tx, ctx: &TenantCtx, owner: &Option<String>) -> ApiResult<()> {
    match owner {
        Some(p) if !personas::exists_in_tenant(&mut **tx, &ctx.tenant_id, p).await? => {
            Err(ApiError::invalid("owner_persona_id is not a persona of this tenant"))
        }
        _ => Ok(()),
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCrmContact)]
struct NewContact {
    #[schema(max_length = 200)]
    name: String,
    /// Email addresses, each naming no other contact of the tenant (409).
    #[schema(max_items = 20)]
    emails: Option<Vec<String>>,
    /// E.164 numbers (`+14155550123`).
    #[schema(max_items = 20)]
    phones: Option<Vec<String>>,
    #[schema(max_length = 200)]
    company: Option<String>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
    attributes: Option<Map<String, Value>>,
}

/// A contact as a request or an ingested record (sdk-ingest) gives it,
/// checked.
pub struct ContactInput {
    pub name: String,
    /// Lowercased, repeats dropped.
    pub emails: Vec<String>,
    phones: Vec<String>,
    company: Option<String>,
    owner: Option<String>,
    attributes: Value,
}

/// A contact's input from its body (which matches its schema): the
/// addresses' forms are checked here.
fn contact_input(check: &mut Check, body: &NewContact) -> ContactInput {
    let name = body.name.trim().to_string();
    let emails = email_list(check, body.emails.as_deref());
    let [_, (p_name, p_valid, p_what)] = ADDRESSES;
    let phones = strings(check, p_name, body.phones.as_deref(), p_valid, p_what);
    let company = Check::optional(&body.company);
    let owner = canonical_uuid_opt(&body.owner_persona_id);
    let attributes = Value::Object(body.attributes.clone().unwrap_or_default());
    ContactInput { name, emails, phones, company, owner, attributes }
}

/// A record with the fields of `POST /api/crm/contacts`, checked: the
/// input, or every problem.
pub fn contact_record(record: &Value) -> Result<ContactInput, Vec<String>> {
    // A record that breaks its schema has the forms of its addresses named
    // as well (after the schema's problems), so that one import answers
    // every problem of a record.
    let body: NewContact = schema_checked(record).map_err(|mut details| {
        for (name, valid, what) in ADDRESSES {
            let items = record.get(name).and_then(Value::as_array).into_iter().flatten();
            // An item that is not a string is the schema's problem already.
            for (i, item) in items.enumerate() {
                if item.as_str().is_some_and(|s| !valid(s.trim())) {
                    details.push(format!("{name}[{i}] must be {what}"));
                }
            }
        }
        details
    })?;
    let mut check = Check::new();
    let input = contact_input(&mut check, &body);
    match check.finish() {
        Ok(()) => Ok(input),
        Err(ApiError::Validation(details)) => Err(details),
        Err(e) => Err(vec![e.to_string()]),
    }
}

/// A record checked against the schema of `T` (the route's request type):
/// `T`, or every problem.
fn schema_checked<T: DeserializeOwned + ToSchema + 'static>(record: &Value) -> Result<T, Vec<String>> {
    match hub_kernel::contract::parse::<T>(record.clone()) {
        Ok(body) => Ok(body),
        Err(ApiError::Validation(details)) => Err(details),
        Err(e) => Err(vec![e.to_string()]),
    }
}

/// The contacts of the tenant holding any of `emails`.
pub async fn contacts_with_emails(tx: &mut Tx, tenant_id: &str, emails: &[String]) -> ApiResult<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for email in emails {
        let holder: Option<String> = sqlx::query_scalar("SELECT contact_id FROM crm_contact_email WHERE tenant_id = $1 AND email = $2")
            .bind(tenant_id)
            .bind(email)
            .fetch_optional(&mut **tx)
            .await?;
        if let Some(h) = holder.filter(|h| !ids.contains(h)) {
            ids.push(h);
        }
    }
    Ok(ids)
}

/// Inserts a contact (no event: the caller records its own); 409 when an
/// address names another contact of the tenant.
pub async fn insert_contact(tx: &mut Tx, ctx: &TenantCtx, input: &ContactInput) -> ApiResult<Contact> {
    owner_of_tenant(tx, ctx, &input.owner).await?;
    // The tenant's contact counts first (their lock, on PostgreSQL); the
    // deltas once nothing can refuse the contact (sdk-ingest goes on with
    // the transaction after a refusal).
    counts::add(tx, &ctx.tenant_id, &mut vec![(ALL_CONTACTS.to_string(), 0)]).await?;
    if let Some(email) = first_taken(tx, &ctx.tenant_id, &input.emails, None).await? {
        return Err(ApiError::Conflict(format!("another contact of this tenant has the email {email}")));
    }
    let mut deltas = contact_counts(input.owner.as_deref(), input.company.as_deref(), 1);
    deltas.push((ALL_CONTACTS.to_string(), 1));
    counts::add(tx, &ctx.tenant_id, &mut deltas).await?;
    let now = db::now();
    let sql = format!(
        "INSERT INTO crm_contact (contact_id, tenant_id, name, emails, phones, company, owner_persona_id, attributes, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING {CONTACT_COLUMNS}"
    );
    let contact: Contact = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&input.name)
        .bind(json!(input.emails).to_string())
        .bind(json!(input.phones).to_string())
        .bind(&input.company)
        .bind(&input.owner)
        .bind(input.attributes.to_string())
        .bind(audit::actor_of(ctx).1)
        .bind(&now)
        .fetch_one(&mut **tx)
        .await?;
    let contact_id = contact.contact_id.to_string();
    add_emails(tx, &ctx.tenant_id, &contact_id, &input.emails).await?;
    index_contact(tx, &ctx.tenant_id, &contact_id, input, &input.emails, &now).await?;
    Ok(contact)
}

/// The contact in the search index (sdk-search), in the write's transaction.
async fn index_contact(tx: &mut Tx, tenant_id: &str, contact_id: &str, input: &ContactInput, emails: &[String], now: &str) -> ApiResult<()> {
    let body = [emails.join(" "), input.phones.join(" "), input.company.clone().unwrap_or_default()].join(" ");
    hub_kernel::search::index(tx, tenant_id, "contact", contact_id, &input.name, &body, now).await
}

/// The first of `emails` naming a contact of the tenant other than `except`.
async fn first_taken(tx: &mut Tx, tenant_id: &str, emails: &[String], except: Option<&str>) -> ApiResult<Option<String>> {
    for email in emails {
        let holder: Option<String> = sqlx::query_scalar("SELECT contact_id FROM crm_contact_email WHERE tenant_id = $1 AND email = $2")
            .bind(tenant_id)
            .bind(email)
            .fetch_optional(&mut **tx)
            .await?;
        if holder.is_some_and(|h| Some(h.as_str()) != except) {
            return Ok(Some(email.clone()));
        }
    }
    Ok(None)
}

async fn add_emails(tx: &mut Tx, tenant_id: &str, contact_id: &str, emails: &[String]) -> ApiResult<()> {
    for email in emails {
        sqlx::query("INSERT INTO crm_contact_email (tenant_id, email, contact_id) VALUES ($1, $2, $3) ON CONFLICT (tenant_id, email) DO NOTHING")
            .bind(tenant_id)
            .bind(email)
            .bind(contact_id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Updates a contact of the tenant from `input`: its fields replaced, its
/// addresses those it had and the input's (409 when one names another
/// contact).
pub async fn update_contact(tx: &mut Tx, ctx: &TenantCtx, contact_id: &str, input: &ContactInput) -> ApiResult<()> {
    owner_of_tenant(tx, ctx, &input.owner).await?;
    // The tenant's contact counts first (their lock, on PostgreSQL), then
    // the contact as it is now.
    counts::add(tx, &ctx.tenant_id, &mut vec![(ALL_CONTACTS.to_string(), 0)]).await?;
    if let Some(email) = first_taken(tx, &ctx.tenant_id, &input.emails, Some(contact_id)).await? {
        return Err(ApiError::Conflict(format!("another contact of this tenant has the email {email}")));
    }
    let current = find_contact(&mut **tx, &ctx.tenant_id, contact_id).await?;
    let mut deltas = contact_counts(current.owner_persona_id.as_deref(), current.company.as_deref(), -1);
    deltas.extend(contact_counts(input.owner.as_deref(), input.company.as_deref(), 1));
    counts::add(tx, &ctx.tenant_id, &mut deltas).await?;
    let mut emails: Vec<String> = current.emails.0.as_array().into_iter().flatten().filter_map(|e| e.as_str().map(str::to_string)).collect();
    for e in &input.emails {
        if !emails.contains(e) {
            emails.push(e.clone());
        }
    }
    let now = db::now();
    index_contact(tx, &ctx.tenant_id, contact_id, input, &emails, &now).await?;
    sqlx::query(
        "UPDATE crm_contact SET name = $3, emails = $4, phones = $5, company = $6, owner_persona_id = $7, attributes = $8, updated_at = $9 \
         WHERE tenant_id = $1 AND contact_id = $2",
    )
    .bind(&ctx.tenant_id)
    .bind(contact_id)
    .bind(&input.name)
    .bind(json!(emails).to_string())
    .bind(json!(input.phones).to_string())
    .bind(&input.company)
    .bind(&input.owner)
    .bind(input.attributes.to_string())
    .bind(&now)
    .execute(&mut **tx)
    .await?;
    add_emails(tx, &ctx.tenant_id, contact_id, &input.emails).await
}

/// Creates a contact.
#[utoipa::path(post, path = "/api/crm/contacts", tag = "sdk-crm", request_body = NewContact,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "race", "emails": ["c-{unique}@races.example.com"] } }))),
    responses((status = 201, description = "the contact", body = Data<Contact>)))]
async fn create_contact(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewContact>) -> ApiResult<Created<Contact>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let input = contact_input(&mut check, &body);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let contact = insert_contact(&mut tx, &ctx, &input).await?;
    let payload = json!({ "contact_id": contact.contact_id, "owner_persona_id": input.owner });
    audit::record(&mut tx, &ctx, events::CRM_CONTACT_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(contact))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContactQuery {
    /// Only the contact with this address (any case).
    email: Option<String>,
    /// Only contacts of this company (exact).
    company: Option<String>,
    /// Only contacts owned by this persona.
    #[param(format = "uuid")]
    owner_persona_id: Option<String>,
}

/// The tenant's contacts, newest first.
#[utoipa::path(get, path = "/api/crm/contacts", tag = "sdk-crm", params(ContactQuery, Page),
    responses((status = 200, description = "one page of contacts", body = ListOf<Contact>)))]
async fn list_contacts(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<ContactQuery>) -> ApiResult<ListOf<Contact>> {
    let email = Check::optional(&q.email).map(|e| e.to_lowercase());
    let company = Check::optional(&q.company);
    let owner = canonical_uuid_opt(&q.owner_persona_id);
    // One filter per combination given, so that each plan reads its index.
    let mut filter = CONTACTS.filter.to_string();
    let mut args: Vec<&str> = vec![&ctx.tenant_id];
    // Each condition's value is parameter `$#`, numbered as it is bound.
    let conditions = [
        (" AND contact_id IN (SELECT contact_id FROM crm_contact_email WHERE tenant_id = $1 AND email = $#)", &email),
        (" AND company = $#", &company),
        (" AND owner_persona_id = $#", &owner),
    ];
    for (condition, value) in conditions {
        if let Some(value) = value {
            args.push(value);
            filter.push_str(&condition.replace('#', &args.len().to_string()));
        }
    }
    // The total from the kept counts when one filter or none is given
    // (an address names one contact at most: those are counted).
    let kept = match (&email, &company, &owner) {
        (None, None, None) => Some(ALL_CONTACTS.to_string()),
        (None, company, owner) if company.is_some() != owner.is_some() => contact_counts(owner.as_deref(), company.as_deref(), 1).pop().map(|c| c.0),
        _ => None,
    };
    let total = match kept {
        Some(name) => counts::get(&state.db.read, &ctx.tenant_id, &name).await?,
        None => extract::count(&state.db.read, CONTACTS.table, &filter, &args).await?,
    };
    page.list_counted::<Contact>(&state.db.read, &CONTACTS, &filter, &args, total).await
}

async fn find_contact<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Contact>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {CONTACT_COLUMNS} FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL");
    let found: Option<Contact> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A contact.
#[utoipa::path(get, path = "/api/crm/contacts/{contact_id}", tag = "sdk-crm", params(("contact_id" = String, Path, description = "the contact")),
    responses((status = 200, description = "the contact", body = Data<Contact>)))]
async fn get_contact(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Contact>> {
    Ok(ok(find_contact(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A contact's timeline: its creation, the leads linked to it and its
/// calls, newest first.
#[utoipa::path(get, path = "/api/crm/contacts/{contact_id}/timeline", tag = "sdk-crm",
    params(("contact_id" = String, Path, description = "the contact"), Page),
    responses((status = 200, description = "one page of touches", body = ListOf<Touch>)))]
async fn timeline(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<Touch>> {
    let contact = find_contact(&state.db.read, &ctx.tenant_id, &id).await?;
    page.list::<Touch>(&state.db.read, &TIMELINE, &[&ctx.tenant_id, &contact.contact_id.to_string()]).await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCrmLead)]
struct NewLead {
    #[schema(max_length = 200)]
    name: String,
    /// A contact of the tenant the lead is about (optional).
    #[schema(format = "uuid")]
    contact_id: Option<String>,
    #[schema(max_length = 200)]
    company: Option<String>,
    /// Where the lead came from (`web`, `referral`, ...).
    #[schema(max_length = 64)]
    source: Option<String>,
    /// `new` when absent.
    status: Option<LeadStatus>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
    attributes: Option<Map<String, Value>>,
}

/// A lead as a request or an ingested record gives it, checked.
pub struct LeadInput {
    name: String,
    contact: Option<String>,
    company: Option<String>,
    source: Option<String>,
    status: LeadStatus,
    owner: Option<String>,
    attributes: Value,
}

/// A lead's input from its body (which matches its schema).
fn lead_input(body: &NewLead) -> LeadInput {
    LeadInput {
        name: body.name.trim().to_string(),
        contact: canonical_uuid_opt(&body.contact_id),
        company: Check::optional(&body.company),
        source: Check::optional(&body.source),
        status: body.status.unwrap_or(LeadStatus::New),
        owner: canonical_uuid_opt(&body.owner_persona_id),
        attributes: Value::Object(body.attributes.clone().unwrap_or_default()),
    }
}

/// A record with the fields of `POST /api/crm/leads`, checked.
pub fn lead_record(record: &Value) -> Result<LeadInput, Vec<String>> {
    schema_checked::<NewLead>(record).map(|body| lead_input(&body))
}

async fn lead_refs(tx: &mut Tx, ctx: &TenantCtx, input: &LeadInput) -> ApiResult<()> {
    if let Some(c) = &input.contact
        && find_contact(&mut **tx, &ctx.tenant_id, c).await.is_err()
    {
        return Err(ApiError::invalid("contact_id is not a contact of this tenant"));
    }
    owner_of_tenant(tx, ctx, &input.owner).await
}

/// Inserts a lead (no event: the caller records its own).
pub async fn insert_lead(tx: &mut Tx, ctx: &TenantCtx, input: &LeadInput) -> ApiResult<Lead> {
    lead_refs(tx, ctx, input).await?;
    let sql = format!(
        "INSERT INTO crm_lead (lead_id, tenant_id, contact_id, name, company, source, status, owner_persona_id, attributes, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {LEAD_COLUMNS}"
    );
    let lead: Lead = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&input.contact)
        .bind(&input.name)
        .bind(&input.company)
        .bind(&input.source)
        .bind(input.status)
        .bind(&input.owner)
        .bind(input.attributes.to_string())
        .bind(audit::actor_of(ctx).1)
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?;
    index_lead(tx, &ctx.tenant_id, &lead.lead_id.to_string(), input, &lead.created_at.to_string()).await?;
    Ok(lead)
}

/// The lead in the search index (sdk-search), in the write's transaction.
async fn index_lead(tx: &mut Tx, tenant_id: &str, lead_id: &str, input: &LeadInput, now: &str) -> ApiResult<()> {
    let body = [input.company.as_deref().unwrap_or_default(), input.source.as_deref().unwrap_or_default(), input.status.as_str()].join(" ");
    hub_kernel::search::index(tx, tenant_id, "lead", lead_id, &input.name, &body, now).await
}

/// Whether `contact_id` names a contact of the tenant that is not erased
/// (a reference another group's row makes to one). The contact's row is
/// locked until `tx` ends (PostgreSQL; SQLite has one writer): an erasure,
/// a guarded `UPDATE` of `erased_at` that a foreign key's `KEY SHARE` lock
/// would not hold back, waits until the referring row is committed, so no
/// row commits referring to a contact erased in between.
pub async fn contact_exists(tx: &mut Tx, tenant_id: &str, contact_id: &str) -> ApiResult<bool> {
    let sql = format!("SELECT 1 FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL{}", db::Backend::of(tx).no_key_update());
    let found: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(contact_id).fetch_optional(&mut **tx).await?;
    Ok(found.is_some())
}

/// Whether `lead_id` is a lead of the tenant.
pub async fn lead_exists(tx: &mut Tx, tenant_id: &str, lead_id: &str) -> ApiResult<bool> {
    let found: Option<String> = sqlx::query_scalar("SELECT lead_id FROM crm_lead WHERE tenant_id = $1 AND lead_id = $2")
        .bind(tenant_id)
        .bind(lead_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(found.is_some())
}

/// Replaces the fields of a lead of the tenant with `input`'s.
pub async fn update_lead(tx: &mut Tx, ctx: &TenantCtx, lead_id: &str, input: &LeadInput) -> ApiResult<()> {
    lead_refs(tx, ctx, input).await?;
    sqlx::query(
        "UPDATE crm_lead SET contact_id = $3, name = $4, company = $5, source = $6, status = $7, owner_persona_id = $8, attributes = $9 \
         WHERE tenant_id = $1 AND lead_id = $2",
    )
    .bind(&ctx.tenant_id)
    .bind(lead_id)
    .bind(&input.contact)
    .bind(&input.name)
    .bind(&input.company)
    .bind(&input.source)
    .bind(input.status)
    .bind(&input.owner)
    .bind(input.attributes.to_string())
    .execute(&mut **tx)
    .await?;
    index_lead(tx, &ctx.tenant_id, lead_id, input, &db::now()).await
}

/// Creates a lead, linked to a contact or not.
#[utoipa::path(post, path = "/api/crm/leads", tag = "sdk-crm", request_body = NewLead,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race" } }))),
    responses((status = 201, description = "the lead", body = Data<Lead>)))]
async fn create_lead(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewLead>) -> ApiResult<Created<Lead>> {
    let input = lead_input(&body.checked()?);
    let mut tx = state.db.begin().await?;
    let lead = insert_lead(&mut tx, &ctx, &input).await?;
    let payload = json!({ "lead_id": lead.lead_id, "contact_id": input.contact, "status": input.status, "source": input.source });
    audit::record(&mut tx, &ctx, events::CRM_LEAD_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(lead))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCrmCall)]
struct NewCall {
    /// The contact called or calling; a contact_id or a lead_id is required.
    #[schema(format = "uuid")]
    contact_id: Option<String>,
    /// The lead; its contact, if it has one, is the call's contact.
    #[schema(format = "uuid")]
    lead_id: Option<String>,
    direction: Direction,
    disposition: Disposition,
    /// 0 when absent.
    #[schema(minimum = 0, maximum = 86400)]
    duration_seconds: Option<i64>,
    /// E.164 (`+14155550123`).
    phone_number: Option<String>,
    /// `https://` or `http://`; needs `recording_consent: true`.
    #[schema(max_length = 2000)]
    recording_url: Option<String>,
    /// Whether the parties consented to the recording; false when absent.
    recording_consent: Option<bool>,
    /// The telephony provider's id of the call: one call of the tenant each (409).
    #[schema(max_length = 256)]
    provider_call_id: Option<String>,
    /// When the call started; now when absent. At most 5 minutes ahead.
    #[schema(format = DateTime)]
    occurred_at: Option<String>,
}

/// Logs a call on a contact's or lead's timeline: `crm.call.logged.v1`, and
/// `crm.call.missed.v1` as well when nobody answered (`no_answer`, `busy`,
/// `failed`).
#[utoipa::path(post, path = "/api/crm/calls", tag = "sdk-crm", request_body = NewCall,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/crm/contacts", { "name": "race" }]], "body": { "contact_id": "{contact_id}", "direction": "inbound", "disposition": "answered", "provider_call_id": "p-{unique}" } }))),
    responses((status = 201, description = "the call", body = Data<Call>)))]
async fn log_call(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCall>) -> ApiResult<Created<Call>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let mut contact = canonical_uuid_opt(&body.contact_id);
    let lead = canonical_uuid_opt(&body.lead_id);
    if contact.is_none() && lead.is_none() {
        check.fail("a call needs a contact_id or a lead_id");
    }
    let direction = body.direction;
    let disposition = body.disposition;
    let duration = body.duration_seconds.unwrap_or(0);
    let phone = Check::optional(&body.phone_number);
    if phone.as_deref().is_some_and(|p| !is_e164(p)) {
        check.fail("phone_number must be an E.164 phone number (e.g. +14155550123)");
    }
    let recording = Check::optional(&body.recording_url);
    if recording.as_deref().is_some_and(|u| !(u.starts_with("https://") || u.starts_with("http://")) || u.chars().any(char::is_whitespace)) {
        check.fail("recording_url must be an http or https URL");
    }
    let consent = body.recording_consent.unwrap_or(false);
    if recording.is_some() && !consent {
        check.fail("recording_url needs recording_consent: true");
    }
    let provider_id = Check::optional(&body.provider_call_id);
    let occurred_at = check.time_or_now("occurred_at", &body.occurred_at);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if let Some(c) = &contact
        && find_contact(&mut *tx, &ctx.tenant_id, c).await.is_err()
    {
        return Err(ApiError::invalid("contact_id is not a contact of this tenant"));
    }
    if let Some(l) = &lead {
        let lead_contact: Option<Option<String>> = sqlx::query_scalar("SELECT contact_id FROM crm_lead WHERE tenant_id = $1 AND lead_id = $2")
            .bind(&ctx.tenant_id)
            .bind(l)
            .fetch_optional(&mut *tx)
            .await?;
        match (lead_contact, &contact) {
            (None, _) => return Err(ApiError::invalid("lead_id is not a lead of this tenant")),
            (Some(Some(of_lead)), Some(given)) if &of_lead != given => return Err(ApiError::invalid("lead_id is a lead of another contact")),
            (Some(of_lead), None) => contact = of_lead,
            _ => {}
        }
    }
    if let Some(p) = &provider_id {
        let seen: Option<String> = sqlx::query_scalar("SELECT call_id FROM crm_call WHERE tenant_id = $1 AND provider_call_id = $2")
            .bind(&ctx.tenant_id)
            .bind(p)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(call) = seen {
            return Err(ApiError::Conflict(format!("provider_call_id {p} is logged already (call {call})")));
        }
    }
    let sql = format!(
        "INSERT INTO crm_call (call_id, tenant_id, contact_id, lead_id, direction, disposition, duration_seconds, phone_number, recording_url, \
         recording_consent, provider_call_id, occurred_at, logged_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
         RETURNING {CALL_COLUMNS}"
    );
    let call: Call = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&contact)
        .bind(&lead)
        .bind(direction)
        .bind(disposition)
        .bind(duration)
        .bind(&phone)
        .bind(&recording)
        .bind(i64::from(consent))
        .bind(&provider_id)
        .bind(&occurred_at)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    // The key set of every `crm.call.logged.v1` (the voice webhook's too):
    // what this route does not know is null.
    let payload = json!({
        "call_id": call.call_id, "call_leg_id": null, "contact_id": contact, "lead_id": lead, "provider": null,
        "provider_call_id": provider_id, "direction": direction, "status": null, "disposition": disposition, "is_voicemail": null,
        "duration_seconds": duration, "recording_consent": consent, "occurred_at": occurred_at, "ended_at": null,
    });
    audit::record(&mut tx, &ctx, events::CRM_CALL_LOGGED, payload.clone()).await?;
    if disposition.missed() {
        audit::record(&mut tx, &ctx, events::CRM_CALL_MISSED, payload).await?;
    }
    tx.commit().await?;
    Ok(created(call))
}

/// The emails of a body, checked: trimmed, lowercased, repeats dropped.
fn email_list(check: &mut Check, value: Option<&[String]>) -> Vec<String> {
    let [(name, valid, what), _] = ADDRESSES;
    strings(check, name, value, valid, what).into_iter().map(|e| e.to_lowercase()).fold(Vec::new(), |mut out, e| {
        if !out.contains(&e) {
            out.push(e);
        }
        out
    })
}

/// The strings of a stored JSON array.
fn stored_strings(list: &JsonText) -> Vec<String> {
    list.0.as_array().into_iter().flatten().filter_map(|e| e.as_str().map(str::to_string)).collect()
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CrmContactUpdate)]
struct ContactUpdate {
    /// Not blank.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Replaces the contact's addresses: one left out names no contact any
    /// more; each names no other contact of the tenant (409).
    #[schema(max_items = 20)]
    emails: Option<Vec<String>>,
    /// Replaces the contact's E.164 numbers.
    #[schema(max_items = 20)]
    phones: Option<Vec<String>>,
    /// A blank company clears it.
    #[schema(max_length = 200)]
    company: Option<String>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
    /// Replaces the attributes.
    attributes: Option<Map<String, Value>>,
}

/// Changes a contact: each field the body gives replaces the contact's
/// (lists and attributes whole), the others stay; at least one field.
/// `crm.contact.updated.v1` names the fields given, never their values.
#[utoipa::path(patch, path = "/api/crm/contacts/{contact_id}", tag = "sdk-crm", request_body = ContactUpdate,
    params(("contact_id" = String, Path, description = "the contact")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/crm/contacts", { "name": "race" }]],
        "body": { "company": "raced", "emails": ["u-{unique}@races.example.com"] } }))),
    responses((status = 200, description = "the contact", body = Data<Contact>),
        (status = 409, description = "Conflict: an address names another contact of the tenant", body = ErrorBody)))]
async fn update_contact_route(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<ContactUpdate>,
) -> ApiResult<Data<Contact>> {
    let id = path_id(&id)?.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.as_deref().map(str::trim);
    if name == Some("") {
        check.fail("name must not be blank");
    }
    let emails = body.emails.as_deref().map(|e| email_list(&mut check, Some(e)));
    let [_, (p_name, p_valid, p_what)] = ADDRESSES;
    let phones = body.phones.as_deref().map(|p| strings(&mut check, p_name, Some(p), p_valid, p_what));
    let company = body.company.is_some().then(|| Check::optional(&body.company));
    let owner = canonical_uuid_opt(&body.owner_persona_id);
    let given: Vec<&str> = [
        ("name", body.name.is_some()),
        ("emails", emails.is_some()),
        ("phones", phones.is_some()),
        ("company", company.is_some()),
        ("owner_persona_id", owner.is_some()),
        ("attributes", body.attributes.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, is)| is.then_some(field))
    .collect();
    if given.is_empty() {
        check.fail("give at least one of name, emails, phones, company, owner_persona_id, attributes");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    owner_of_tenant(&mut tx, &ctx, &owner).await?;
    // The tenant's contact counts first (their lock, on PostgreSQL: the
    // contact writes of the tenant queue there), then the contact as it is.
    counts::add(&mut tx, &ctx.tenant_id, &mut vec![(ALL_CONTACTS.to_string(), 0)]).await?;
    let current = find_contact(&mut *tx, &ctx.tenant_id, &id).await?;
    if let Some(list) = &emails
        && let Some(email) = first_taken(&mut tx, &ctx.tenant_id, list, Some(&id)).await?
    {
        return Err(ApiError::Conflict(format!("another contact of this tenant has the email {email}")));
    }
    let input = ContactInput {
        name: name.map_or_else(|| current.name.clone(), str::to_string),
        emails: emails.unwrap_or_else(|| stored_strings(&current.emails)),
        phones: phones.unwrap_or_else(|| stored_strings(&current.phones)),
        company: company.unwrap_or_else(|| current.company.clone()),
        owner: owner.or_else(|| current.owner_persona_id.clone()),
        attributes: body.attributes.map_or_else(|| current.attributes.0.clone(), Value::Object),
    };
    let mut deltas = contact_counts(current.owner_persona_id.as_deref(), current.company.as_deref(), -1);
    deltas.extend(contact_counts(input.owner.as_deref(), input.company.as_deref(), 1));
    counts::add(&mut tx, &ctx.tenant_id, &mut deltas).await?;
    if given.contains(&"emails") {
        sqlx::query("DELETE FROM crm_contact_email WHERE tenant_id = $1 AND contact_id = $2").bind(&ctx.tenant_id).bind(&id).execute(&mut *tx).await?;
        add_emails(&mut tx, &ctx.tenant_id, &id, &input.emails).await?;
    }
    let now = db::now();
    let sql = format!(
        "UPDATE crm_contact SET name = $3, emails = $4, phones = $5, company = $6, owner_persona_id = $7, attributes = $8, updated_at = $9 \
         WHERE tenant_id = $1 AND contact_id = $2 RETURNING {CONTACT_COLUMNS}"
    );
    let contact: Contact = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&input.name)
        .bind(json!(input.emails).to_string())
        .bind(json!(input.phones).to_string())
        .bind(&input.company)
        .bind(&input.owner)
        .bind(input.attributes.to_string())
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    index_contact(&mut tx, &ctx.tenant_id, &id, &input, &input.emails, &now).await?;
    audit::record(&mut tx, &ctx, events::CRM_CONTACT_UPDATED, json!({ "contact_id": id, "fields": given })).await?;
    tx.commit().await?;
    Ok(ok(contact))
}

/// What erasing a contact answers.
#[derive(Serialize, ToSchema)]
#[schema(as = CrmContactErased)]
struct Erased {
    contact_id: Id,
    /// Always true: the contact's personal data is gone.
    erased: bool,
    erased_at: Timestamp,
}

/// Erases a contact (the right to erasure): its name, addresses, numbers,
/// company, owner and attributes are cleared, its addresses name no contact
/// any more, it leaves the search index, and the phone numbers and
/// recording URLs of its calls and the holder names of its tickets are
/// cleared. Its id stays, as a tombstone, because the audit chain and other
/// groups' rows name it: from then on every route answers 404 for it.
/// Its leads are records of their own (`DELETE /api/crm/leads/{lead_id}`).
/// `crm.contact.erased.v1` carries the id only.
#[utoipa::path(delete, path = "/api/crm/contacts/{contact_id}", tag = "sdk-crm", params(("contact_id" = String, Path, description = "the contact")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/crm/contacts", { "name": "race", "emails": ["e-{unique}@races.example.com"] }]] }))),
    responses((status = 200, description = "the contact, erased", body = Data<Erased>)))]
async fn erase_contact(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Erased>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The contact writes of the tenant queue on its counts (PostgreSQL):
    // of two erasures at once, the second finds the contact erased (404).
    counts::add(&mut tx, &ctx.tenant_id, &mut vec![(ALL_CONTACTS.to_string(), 0)]).await?;
    let current = find_contact(&mut *tx, &ctx.tenant_id, &id).await?;
    let now = db::now();
    let erased: Option<Timestamp> = sqlx::query_scalar(
        "UPDATE crm_contact SET name = '', emails = '[]', phones = '[]', company = NULL, owner_persona_id = NULL, attributes = '{}', \
         updated_at = $3, erased_at = $3 WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL RETURNING erased_at",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    let erased_at = erased.ok_or(ApiError::NotFound)?;
    let mut deltas = contact_counts(current.owner_persona_id.as_deref(), current.company.as_deref(), -1);
    deltas.push((ALL_CONTACTS.to_string(), -1));
    counts::add(&mut tx, &ctx.tenant_id, &mut deltas).await?;
    sqlx::query("DELETE FROM crm_contact_email WHERE tenant_id = $1 AND contact_id = $2").bind(&ctx.tenant_id).bind(&id).execute(&mut *tx).await?;
    sqlx::query("UPDATE crm_call SET phone_number = NULL, recording_url = NULL WHERE tenant_id = $1 AND contact_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .execute(&mut *tx)
        .await?;
    crate::ticket::forget_holder(&mut tx, &ctx.tenant_id, &id).await?;
    hub_kernel::search::remove(&mut tx, &ctx.tenant_id, "contact", &id).await?;
    // The erased person's sequence enrolments that are still running are
    // cancelled, each with its event as `POST .../cancel` records it: no
    // send stays scheduled for them. The outreach area's table is written
    // where it is (the CRM does not depend on the outreach crate); an
    // enrolment being made at once has locked the contact's row, so it is
    // committed before this erasure goes on and is cancelled here.
    let mut cancelled: Vec<(String, String)> = sqlx::query_as(
        "UPDATE sequence_enrollment SET status = 'cancelled', cancelled_at = $3 \
         WHERE tenant_id = $1 AND contact_id = $2 AND status = 'active' AND ends_at > $3 RETURNING enrollment_id, sequence_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(&now)
    .fetch_all(&mut *tx)
    .await?;
    cancelled.sort();
    for (enrollment_id, sequence_id) in cancelled {
        let payload = json!({ "enrollment_id": enrollment_id, "sequence_id": sequence_id, "contact_id": id });
        audit::record(&mut tx, &ctx, events::SEQUENCE_ENROLLMENT_CANCELLED, payload).await?;
    }
    audit::record(&mut tx, &ctx, events::CRM_CONTACT_ERASED, json!({ "contact_id": id })).await?;
    tx.commit().await?;
    Ok(ok(Erased { contact_id: current.contact_id, erased: true, erased_at }))
}

/// A lead as guarded writes name it.
const LEAD: Stateful = Stateful { noun: "lead", table: "crm_lead", key: "lead_id", state: "status" };

/// The leads, newest first; `list_leads` composes the filter.
const LEADS: Listing = Listing { table: "crm_lead", columns: LEAD_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, lead_id DESC" };

/// The rows of `listing` of the tenant with each given `(condition, value)`
/// (a condition's value is `$#`, numbered as it is bound), one page.
pub(crate) async fn filtered<T>(state: &AppState, ctx: &TenantCtx, page: Page, listing: &Listing, conditions: &[(&str, Option<&str>)]) -> ApiResult<ListOf<T>>
where
    T: for<'r> FromRow<'r, sqlx::any::AnyRow> + Serialize + Send + Unpin,
{
    let mut filter = listing.filter.to_string();
    let mut args: Vec<&str> = vec![&ctx.tenant_id];
    for (condition, value) in conditions {
        if let Some(value) = value {
            args.push(value);
            filter.push_str(&condition.replace('#', &args.len().to_string()));
        }
    }
    let total = extract::count(&state.db.read, listing.table, &filter, &args).await?;
    page.list_counted::<T>(&state.db.read, listing, &filter, &args, total).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LeadQuery {
    /// Only leads in this status.
    #[param(inline)]
    status: Option<LeadStatus>,
    /// Only leads owned by this persona.
    #[param(format = "uuid")]
    owner_persona_id: Option<String>,
    /// Only the leads of this contact.
    #[param(format = "uuid")]
    contact_id: Option<String>,
    /// Only leads from this source (exact).
    source: Option<String>,
}

/// The tenant's leads, newest first.
#[utoipa::path(get, path = "/api/crm/leads", tag = "sdk-crm", params(LeadQuery, Page),
    responses((status = 200, description = "one page of leads", body = ListOf<Lead>)))]
async fn list_leads(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<LeadQuery>) -> ApiResult<ListOf<Lead>> {
    let owner = canonical_uuid_opt(&q.owner_persona_id);
    let contact = canonical_uuid_opt(&q.contact_id);
    let source = Check::optional(&q.source);
    let conditions = [
        (" AND status = $#", q.status.map(LeadStatus::as_str)),
        (" AND owner_persona_id = $#", owner.as_deref()),
        (" AND contact_id = $#", contact.as_deref()),
        (" AND source = $#", source.as_deref()),
    ];
    filtered(&state, &ctx, page, &LEADS, &conditions).await
}

async fn find_lead<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Lead>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {LEAD_COLUMNS} FROM crm_lead WHERE tenant_id = $1 AND lead_id = $2");
    let found: Option<Lead> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A lead.
#[utoipa::path(get, path = "/api/crm/leads/{lead_id}", tag = "sdk-crm", params(("lead_id" = String, Path, description = "the lead")),
    responses((status = 200, description = "the lead", body = Data<Lead>)))]
async fn get_lead(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Lead>> {
    Ok(ok(find_lead(&state.db.read, &ctx.tenant_id, &id).await?))
}

impl LeadStatus {
    /// The states a lead may be in to be moved to this one (itself
    /// included: setting the status a lead has changes nothing). A lead
    /// goes `new` → `contacted` → `qualified` or `unqualified`, skipping
    /// `contacted` or not; `qualified` and `unqualified` are final.
    fn reached_from(self) -> &'static [LeadStatus] {
        use LeadStatus::*;
        match self {
            New => &[New],
            Contacted => &[New, Contacted],
            Qualified => &[New, Contacted, Qualified],
            Unqualified => &[New, Contacted, Unqualified],
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CrmLeadUpdate)]
struct LeadUpdate {
    /// Not blank.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// A blank company clears it.
    #[schema(max_length = 200)]
    company: Option<String>,
    /// A blank source clears it.
    #[schema(max_length = 64)]
    source: Option<String>,
    /// `new` → `contacted` → `qualified` or `unqualified` (final); any
    /// other move is 409.
    status: Option<LeadStatus>,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
    /// Replaces the attributes.
    attributes: Option<Map<String, Value>>,
}

/// Changes a lead: its status along its qualification, its owner, name,
/// company, source or attributes (what the body leaves out stays; at
/// least one field). A status the lead cannot move to is 409 naming the
/// state it is in; the status it has already is no move. Records
/// `crm.lead.updated.v1` with the fields given and the status.
#[utoipa::path(patch, path = "/api/crm/leads/{lead_id}", tag = "sdk-crm", request_body = LeadUpdate,
    params(("lead_id" = String, Path, description = "the lead")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/crm/leads", { "name": "race" }]], "body": { "status": "contacted" } }))),
    responses((status = 200, description = "the lead", body = Data<Lead>),
        (status = 409, description = "Conflict: the lead's status cannot move to the one given", body = ErrorBody)))]
async fn update_lead_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<LeadUpdate>) -> ApiResult<Data<Lead>> {
    let id = path_id(&id)?.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let mut sets: Vec<(&str, Option<String>)> = Vec::new();
    if let Some(name) = body.name.as_deref().map(str::trim) {
        if name.is_empty() {
            check.fail("name must not be blank");
        }
        sets.push(("name", Some(name.to_string())));
    }
    if body.company.is_some() {
        sets.push(("company", Check::optional(&body.company)));
    }
    if body.source.is_some() {
        sets.push(("source", Check::optional(&body.source)));
    }
    if let Some(status) = body.status {
        sets.push(("status", Some(status.as_str().to_string())));
    }
    let owner = canonical_uuid_opt(&body.owner_persona_id);
    if owner.is_some() {
        sets.push(("owner_persona_id", owner.clone()));
    }
    if let Some(attributes) = &body.attributes {
        sets.push(("attributes", Some(Value::Object(attributes.clone()).to_string())));
    }
    if sets.is_empty() {
        check.fail("give at least one of name, company, source, status, owner_persona_id, attributes");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    owner_of_tenant(&mut tx, &ctx, &owner).await?;
    // One guarded statement: the status moves only from a state that
    // allows it (of two moves at once, the second sees the first's state).
    let set: Vec<String> = sets.iter().enumerate().map(|(i, (column, _))| format!("{column} = ${}", i + 3)).collect();
    let guard = match body.status {
        Some(status) => {
            let from: Vec<String> = status.reached_from().iter().map(|s| format!("'{}'", s.as_str())).collect();
            format!(" AND status IN ({})", from.join(", "))
        }
        None => String::new(),
    };
    let sql = format!("UPDATE crm_lead SET {} WHERE tenant_id = $1 AND lead_id = $2{guard} RETURNING {LEAD_COLUMNS}", set.join(", "));
    let mut update = sqlx::query_as::<_, Lead>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id);
    for (_, value) in &sets {
        update = update.bind(value.clone());
    }
    let written = update.fetch_optional(&mut *tx).await?;
    let expected = match body.status {
        Some(LeadStatus::New) => "a lead cannot go back to new".to_string(),
        Some(status) => {
            let from: Vec<&str> = status.reached_from().iter().filter(|s| **s != status).map(|s| s.as_str()).collect();
            format!("only a {} lead can become {status}", from.join(" or "))
        }
        None => String::new(),
    };
    let lead = LEAD.settle(&mut tx, &ctx.tenant_id, &id, written, &expected).await?;
    index_lead(&mut tx, &ctx.tenant_id, &id, &input_of(&lead), &db::now()).await?;
    let fields: Vec<&str> = sets.iter().map(|(column, _)| *column).collect();
    audit::record(&mut tx, &ctx, events::CRM_LEAD_UPDATED, json!({ "lead_id": id, "fields": fields, "status": lead.status })).await?;
    tx.commit().await?;
    Ok(ok(lead))
}

/// The input a stored lead would be written from (to index it again).
fn input_of(lead: &Lead) -> LeadInput {
    LeadInput {
        name: lead.name.clone(),
        contact: lead.contact_id.map(|c| c.to_string()),
        company: lead.company.clone(),
        source: lead.source.clone(),
        status: lead.status,
        owner: lead.owner_persona_id.clone(),
        attributes: lead.attributes.0.clone(),
    }
}

/// What deleting a lead answers.
#[derive(Serialize, ToSchema)]
#[schema(as = CrmLeadDeleted)]
struct LeadDeleted {
    lead_id: Id,
    /// Always true: the lead is gone.
    deleted: bool,
}

/// Deletes a lead: the row and its search entry are removed; calls logged
/// on it for a contact stay on the contact's timeline without the lead,
/// calls logged on the lead alone go with it. `crm.lead.deleted.v1`
/// carries the ids only.
#[utoipa::path(delete, path = "/api/crm/leads/{lead_id}", tag = "sdk-crm", params(("lead_id" = String, Path, description = "the lead")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/crm/leads", { "name": "race" }]] }))),
    responses((status = 200, description = "deleted", body = Data<LeadDeleted>)))]
async fn delete_lead(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<LeadDeleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The lead's row, locked: of two deletes at once, the second finds
    // nothing once the first commits (404).
    LEAD.lock::<String>(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let dropped: Vec<String> = sqlx::query_scalar("DELETE FROM crm_call WHERE tenant_id = $1 AND lead_id = $2 AND contact_id IS NULL RETURNING call_id")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_all(&mut *tx)
        .await?;
    sqlx::query("UPDATE crm_call SET lead_id = NULL WHERE tenant_id = $1 AND lead_id = $2").bind(&ctx.tenant_id).bind(&id).execute(&mut *tx).await?;
    let deleted: Option<Id> = sqlx::query_scalar("DELETE FROM crm_lead WHERE tenant_id = $1 AND lead_id = $2 RETURNING lead_id")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let lead_id = deleted.ok_or(ApiError::NotFound)?;
    hub_kernel::search::remove(&mut tx, &ctx.tenant_id, "lead", &id).await?;
    audit::record(&mut tx, &ctx, events::CRM_LEAD_DELETED, json!({ "lead_id": id, "calls_deleted": dropped })).await?;
    tx.commit().await?;
    Ok(ok(LeadDeleted { lead_id, deleted: true }))
}

/// The calls, newest first; `list_calls` composes the filter.
const CALLS: Listing = Listing { table: "crm_call", columns: CALL_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, call_id DESC" };

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CallQuery {
    /// Only calls of this contact.
    #[param(format = "uuid")]
    contact_id: Option<String>,
    /// Only calls of this lead.
    #[param(format = "uuid")]
    lead_id: Option<String>,
    /// Only calls that ended so.
    #[param(inline)]
    disposition: Option<Disposition>,
    /// Only calls placed so.
    #[param(inline)]
    direction: Option<Direction>,
}

/// The tenant's logged calls, newest first.
#[utoipa::path(get, path = "/api/crm/calls", tag = "sdk-crm", params(CallQuery, Page),
    responses((status = 200, description = "one page of calls", body = ListOf<Call>)))]
async fn list_calls(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<CallQuery>) -> ApiResult<ListOf<Call>> {
    let contact = canonical_uuid_opt(&q.contact_id);
    let lead = canonical_uuid_opt(&q.lead_id);
    let conditions = [
        (" AND contact_id = $#", contact.as_deref()),
        (" AND lead_id = $#", lead.as_deref()),
        (" AND disposition = $#", q.disposition.map(Disposition::as_str)),
        (" AND direction = $#", q.direction.map(Direction::as_str)),
    ];
    filtered(&state, &ctx, page, &CALLS, &conditions).await
}

/// A logged call.
#[utoipa::path(get, path = "/api/crm/calls/{call_id}", tag = "sdk-crm", params(("call_id" = String, Path, description = "the call")),
    responses((status = 200, description = "the call", body = Data<Call>)))]
async fn get_call(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Call>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {CALL_COLUMNS} FROM crm_call WHERE tenant_id = $1 AND call_id = $2");
    let found: Option<Call> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
