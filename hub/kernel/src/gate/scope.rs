//! Scopes: the rule of "Authentication" 5 that derives the scope a request
//! needs from its route, the format a granted scope must have, and the
//! matching of granted scopes (with tail wildcards) against a required one.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, RwLock},
};

/// The scope a request needs: `<domain>.<resource>.<action>`.
///
/// `route` is the matched route template (`/api/sla/policies/{id}/rungs`).
/// The domain is the first segment after `/api`, the resource the next one;
/// both are singularised. A path parameter is not a resource name, so when
/// the next segment is a parameter or absent the domain doubles as the
/// resource. The action is `read` for GET and HEAD, otherwise `write`.
/// Routes outside `/api/` need no scope (`None`).
pub fn required(method: &str, route: &str) -> Option<String> {
    let rest = route.strip_prefix("/api/")?;
    let mut segments = rest.split('/').filter(|s| !s.is_empty());
    let domain = singular(segments.next()?);
    let resource = match segments.next() {
        Some(s) if !is_param(s) => singular(s),
        _ => domain.clone(),
    };
    let action = if is_read(method) { "read" } else { "write" };
    Some(format!("{domain}.{resource}.{action}"))
}

/// [`required`] for a request's matched route, remembered per route
/// template and action: the gate asks on every request, and the templates
/// are the catalogue's, a bounded set.
pub fn required_for_route(method: &str, route: &str) -> Option<Arc<str>> {
    /// Per action (read, write): the scope of each template asked about.
    type Known = [RwLock<HashMap<Box<str>, Option<Arc<str>>>>; 2];
    static KNOWN: LazyLock<Known> = LazyLock::new(Default::default);
    let known = &KNOWN[usize::from(is_read(method))];
    if let Some(scope) = known.read().expect("scope lock").get(route) {
        return scope.clone();
    }
    let scope: Option<Arc<str>> = required(method, route).map(Arc::from);
    known.write().expect("scope lock").insert(route.into(), scope.clone());
    scope
}

/// Whether a method reads (GET, HEAD): the action of its scope.
fn is_read(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

fn is_param(segment: &str) -> bool {
    segment.starts_with('{') || segment.starts_with(':')
}

/// English singular of a path segment; for hyphenated names only the last
/// word changes (`role-assignments` -> `role-assignment`).
pub fn singular(word: &str) -> String {
    let w = word.to_ascii_lowercase();
    let (head, last) = match w.rfind('-') {
        Some(i) => (&w[..=i], &w[i + 1..]),
        None => ("", w.as_str()),
    };
    let last = if let Some(stem) = last.strip_suffix("ies").filter(|s| s.len() > 1) {
        format!("{stem}y")
    } else if last.ends_with("sses") || last.ends_with("ches") || last.ends_with("shes") || last.ends_with("xes") || last.ends_with("zzes") {
        last[..last.len() - 2].to_string()
    } else if last.ends_with("ss") || last.ends_with("us") || last.ends_with("is") || last.len() <= 2 {
        last.to_string()
    } else if let Some(stem) = last.strip_suffix('s') {
        stem.to_string()
    } else {
        last.to_string()
    };
    format!("{head}{last}")
}

/// Whether a granted scope has the accepted form: three dot-separated
/// segments, or a tail wildcard (`*`, `crm.*`, `crm.contact.*`).
pub fn is_valid(scope: &str) -> bool {
    let parts: Vec<&str> = scope.split('.').collect();
    let segment_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    match parts.as_slice() {
        ["*"] => true,
        [d, "*"] => segment_ok(d),
        [d, r, "*"] => segment_ok(d) && segment_ok(r),
        [d, r, a] => segment_ok(d) && segment_ok(r) && segment_ok(a),
        _ => false,
    }
}

/// Whether `granted` (possibly a tail wildcard) covers `required`.
pub fn covers(granted: &str, required: &str) -> bool {
    if granted == "*" || granted == required {
        return true;
    }
    match granted.strip_suffix(".*") {
        Some(prefix) => required.len() > prefix.len() && required.starts_with(prefix) && required.as_bytes()[prefix.len()] == b'.',
        None => false,
    }
}

/// Whether any of `granted` covers `required`.
pub fn any_covers<S: AsRef<str>>(granted: &[S], required: &str) -> bool {
    granted.iter().any(|g| covers(g.as_ref(), required))
}

/// The scopes covered by both `a` and `b` (each a set of patterns), as
/// patterns: of two overlapping patterns the narrower one.
pub fn intersect<A: AsRef<str>, B: AsRef<str>>(a: &[A], b: &[B]) -> Vec<String> {
    let mut out = Vec::new();
    for x in a.iter().map(AsRef::as_ref) {
        for y in b.iter().map(AsRef::as_ref) {
            if covers(x, y) {
                out.push(y.to_string());
            } else if covers(y, x) {
                out.push(x.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_scope_is_the_derived_one_per_action() {
        for (method, route) in [("GET", "/api/sla/policies/{id}/rungs"), ("POST", "/api/sla/policies/{id}/rungs"), ("HEAD", "/api/me"), ("GET", "/health")] {
            for _ in 0..2 {
                assert_eq!(required_for_route(method, route).as_deref(), required(method, route).as_deref(), "{method} {route}");
            }
        }
    }

    #[test]
    fn the_four_documented_examples_derive_their_scopes() {
        assert_eq!(required("GET", "/api/crm/contacts").unwrap(), "crm.contact.read");
        assert_eq!(required("POST", "/api/sla/clocks").unwrap(), "sla.clock.write");
        assert_eq!(required("POST", "/api/sla/policies/{id}/rungs").unwrap(), "sla.policy.write");
        assert_eq!(required("GET", "/api/sequences").unwrap(), "sequence.sequence.read");
    }

    #[test]
    fn a_path_parameter_after_the_domain_makes_the_domain_the_resource() {
        assert_eq!(required("POST", "/api/personas/{persona_id}/shred").unwrap(), "persona.persona.write");
        assert_eq!(required("POST", "/api/role-assignments").unwrap(), "role-assignment.role-assignment.write");
        assert_eq!(required("HEAD", "/api/devices/{device_uuid}").unwrap(), "device.device.read");
        assert_eq!(required("GET", "/health"), None);
    }

    #[test]
    fn singularisation_handles_common_english_plurals() {
        for (plural, one) in [
            ("policies", "policy"),
            ("addresses", "address"),
            ("app-identities", "app-identity"),
            ("boxes", "box"),
            ("status", "status"),
            ("diagnostic", "diagnostic"),
            ("api-keys", "api-key"),
            ("memberships", "membership"),
            ("hdk", "hdk"),
            ("analysis", "analysis"),
        ] {
            assert_eq!(singular(plural), one, "{plural}");
        }
    }

    #[test]
    fn tail_wildcards_cover_their_subtree_only() {
        assert!(covers("crm.*", "crm.contact.read"));
        assert!(covers("crm.contact.*", "crm.contact.write"));
        assert!(covers("*", "sla.clock.write"));
        assert!(!covers("crm.*", "crmx.contact.read"));
        assert!(!covers("crm.contact.*", "crm.contacts.read"));
        assert!(!covers("crm.contact.read", "crm.contact.write"));
    }

    #[test]
    fn malformed_scopes_are_rejected() {
        for bad in ["crm", "crm:read", "crm.contact", "crm.*.read", "", "CRM.contact.read", "a.b.c.d", "*.crm"] {
            assert!(!is_valid(bad), "{bad}");
        }
        for good in ["crm.contact.read", "crm.*", "crm.contact.*", "*", "role-assignment.role-assignment.write"] {
            assert!(is_valid(good), "{good}");
        }
    }

    #[test]
    fn intersections_keep_the_narrower_of_overlapping_patterns() {
        assert_eq!(intersect(&["*"], &["role-assignment.*", "persona.persona.read"]), vec!["persona.persona.read", "role-assignment.*"]);
        assert_eq!(intersect(&["crm.contact.read", "sla.*"], &["crm.*"]), vec!["crm.contact.read"]);
        assert!(intersect(&["crm.*"], &["sla.clock.read"]).is_empty());
    }
}
