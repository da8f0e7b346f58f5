//! The full-text index behind sdk-search: one `search_document` row per
//! searchable resource of a tenant (its kind, id, title and body text),
//! written by the resource's own create and update paths IN THEIR
//! TRANSACTION, so a search sees a resource as soon as its write answers.
//! SQLite indexes the rows in an FTS5 table its triggers keep in step;
//! PostgreSQL in a generated `tsvector` column under a GIN index. Both
//! index words (runs of letters and digits), lowercased, unstemmed.

use serde_json::Value;

use crate::{db::Tx, error::ApiResult};

/// The searchable kinds, and the scope a caller needs to read each (the
/// scope of its list or read route).
pub const KINDS: [(&str, &str); 4] =
    [("contact", "crm.contact.read"), ("lead", "crm.lead.read"), ("content_item", "content.item.read"), ("incident", "incident.incident.read")];

/// The most body text indexed per document, bytes.
const MAX_BODY: usize = 64 * 1024;

/// The text of a JSON value: its strings (and numbers), space-separated.
pub fn text_of(value: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push(' ');
            }
            Value::Number(n) => {
                out.push_str(&n.to_string());
                out.push(' ');
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out.truncate(out.trim_end().len());
    out
}

/// Indexes (or re-indexes) one resource of a tenant.
pub async fn index(tx: &mut Tx, tenant_id: &str, kind: &str, ref_id: &str, title: &str, body: &str, updated_at: &str) -> ApiResult<()> {
    let mut end = body.len().min(MAX_BODY);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    sqlx::query(
        "INSERT INTO search_document (tenant_id, kind, ref_id, title, body, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (tenant_id, kind, ref_id) DO UPDATE SET title = excluded.title, body = excluded.body, updated_at = excluded.updated_at",
    )
    .bind(tenant_id)
    .bind(kind)
    .bind(ref_id)
    .bind(title)
    .bind(&body[..end])
    .bind(updated_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Removes one resource of a tenant from the index (a deleted or erased
/// resource), in the write's transaction.
pub async fn remove(tx: &mut Tx, tenant_id: &str, kind: &str, ref_id: &str) -> ApiResult<()> {
    sqlx::query("DELETE FROM search_document WHERE tenant_id = $1 AND kind = $2 AND ref_id = $3")
        .bind(tenant_id)
        .bind(kind)
        .bind(ref_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The words of a query, lowercased: what both backends match.
pub fn words(query: &str) -> Vec<String> {
    query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).take(32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_words() {
        assert_eq!(text_of(&serde_json::json!({ "a": "Hello", "b": [1, { "c": "world" }], "d": null })), "Hello 1 world");
        assert_eq!(words("Ana's e-mail: ANA@example.com!"), ["ana", "s", "e", "mail", "ana", "example", "com"]);
    }
}
