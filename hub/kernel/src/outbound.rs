//! URLs the hub calls out to: what they may carry when stored, and how
//! they are written in the log.
//!
//! A URL's user information (`user@`, `user:password@`) is a credential in
//! clear: stored in a column nobody seals, shown back in answers, and
//! written in the log wherever the URL is. Where the hub stores a URL
//! whose credential has its own field (CalDAV connections, AI routes) or
//! whose receiver authenticates the hub otherwise (webhook signatures,
//! the SIEM forwarder), a URL with user information is refused; the
//! check is [`no_userinfo`].
//!
//! Every URL, href or endpoint the hub logs goes through [`redact_url`]
//! first, so what a log line shows of a URL is decided in one place.
//!
//! Every request the hub sends to another server goes through [`send`]: a
//! client span, and that span's context in the request's `traceparent`.

use opentelemetry_http::HeaderInjector;
use tracing::{Instrument, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The placeholder a query value is replaced with in the log.
pub const REDACTED: &str = "REDACTED";

/// Whether a URL carries user information (`user@` or `user:password@`).
pub fn has_userinfo(url: &url::Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// Refuses a URL with user information; the error names `field` and is a
/// `ValidationError` detail. A string that is no URL passes: whether it is
/// one is the caller's check, with its own message.
pub fn no_userinfo(field: &str, raw: &str) -> Result<(), String> {
    if url::Url::parse(raw).is_ok_and(|url| has_userinfo(&url)) {
        return Err(format!("{field} must not carry user information (user@ or user:password@ before the host)"));
    }
    Ok(())
}

/// A URL as the log may show it: no user information, every query value
/// replaced by [`REDACTED`] (the names stay, they say what was asked),
/// no fragment. The scheme, host, port and path stay: they are what an
/// operator needs to find the server that failed. A string that does not
/// parse as a URL with a host loses what could be user information
/// (everything up to the last `@` of its authority) and everything from its
/// first `?` or `#`.
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(url) => redact(&url),
        Err(_) => redact_unparsed(raw),
    }
}

/// [`redact_url`] of a parsed URL.
pub fn redact(url: &url::Url) -> String {
    // A string such as `user:PW@host/p` parses as a URL of the scheme
    // `user` without a host, whose path holds the password: without a host
    // it is cut as a string that is no URL.
    if !url.has_host() {
        return redact_unparsed(url.as_str());
    }
    let mut out = url.clone();
    // Both setters succeed on a URL with a host.
    let _ = out.set_password(None);
    let _ = out.set_username("");
    out.set_fragment(None);
    if let Some(query) = url.query() {
        let names: Vec<String> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                None => pair.to_string(),
            })
            .collect();
        out.set_query(Some(&names.join("&")));
    }
    out.to_string()
}

fn redact_unparsed(raw: &str) -> String {
    let cut = raw.find(['?', '#']).map_or(raw, |i| &raw[..i]);
    let (scheme, rest) = match cut.find("://") {
        Some(i) => cut.split_at(i + 3),
        None => ("", cut),
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    format!("{scheme}{host}{path}")
}

/// Sends one of the hub's own requests to another server (a webhook
/// delivery, a model provider's completion, a calendar push, a storm feed)
/// in a client span, after OpenTelemetry's HTTP client conventions: named
/// by its method, with `http.request.method`, `url.full` as [`redact`]
/// writes it, `server.address`, `server.port`, `http.response.status_code`,
/// and `error.type` with an error status when no answer came or the answer
/// is a 4xx or 5xx. The request carries the span's context in `traceparent`
/// (and `tracestate`), written by the process's propagator (W3C Trace
/// Context, set by the hub binary when it exports traces; none otherwise),
/// so the receiver's spans join the hub's trace. The span ends once the
/// answer's head is in; the caller reads the body.
pub async fn send(request: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
    let (client, request) = request.build_split();
    let mut request = request?;
    let span = client_span(request.method(), request.url());
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.inject_context(&context, &mut HeaderInjector(request.headers_mut())));
    let sent = client.execute(request).instrument(span.clone()).await;
    let failure = match &sent {
        Ok(res) => {
            let status = res.status();
            span.record("http.response.status_code", i64::from(status.as_u16()));
            (status.is_client_error() || status.is_server_error()).then(|| status.as_str().to_owned())
        }
        Err(e) => Some(error_type(e).to_owned()),
    };
    if let Some(kind) = failure {
        span.record("error.type", kind.as_str());
        span.record("otel.status_code", "error");
    }
    sent
}

/// The client span of a request to `url`. Integers are `i64`: the
/// OpenTelemetry layer writes an unsigned field as text.
fn client_span(method: &reqwest::Method, url: &url::Url) -> tracing::Span {
    let address = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(host) => host.to_string(),
        None => String::new(),
    };
    tracing::info_span!("outbound",
        otel.kind = "client",
        otel.name = %method,
        http.request.method = %method,
        url.full = %redact(url),
        server.address = %address,
        server.port = url.port_or_known_default().map(i64::from),
        http.response.status_code = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// `error.type` of a request that got no answer.
fn error_type(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_redirect() {
        "redirect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else if e.is_request() {
        "request"
    } else {
        "_OTHER"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_sees_no_user_information_and_no_query_value() {
        let cases = [
            ("http://user:PW@cal.example.com/dav/u/event.ics", "http://cal.example.com/dav/u/event.ics"),
            ("https://user@cal.example.com:8443/dav/", "https://cal.example.com:8443/dav/"),
            ("https://:PW@cal.example.com/", "https://cal.example.com/"),
            ("https://feed.example.com/r?from=x&key=SECRET&flag#tok=SECRET", "https://feed.example.com/r?from=REDACTED&key=REDACTED&flag"),
            ("https://u:p@[2001:db8::1]/x?token=SECRET", "https://[2001:db8::1]/x?token=REDACTED"),
            ("https://hooks.example.com/x", "https://hooks.example.com/x"),
            // Not URLs: what could be user information and the query go all the same.
            ("http://us er:PW@host name/p?key=SECRET", "http://host name/p"),
            ("user:PW@host/p#SECRET", "host/p"),
            ("", ""),
        ];
        for (raw, logged) in cases {
            assert_eq!(redact_url(raw), logged, "{raw}");
            assert!(!redact_url(raw).contains("PW") && !redact_url(raw).contains("SECRET"), "{raw}");
        }
    }

    #[test]
    fn user_information_is_refused_naming_the_field() {
        for with in ["http://user:PW@cal.example.com/", "http://user@cal.example.com/", "http://:PW@cal.example.com/"] {
            assert!(has_userinfo(&url::Url::parse(with).unwrap()), "{with}");
            assert!(no_userinfo("collection_url", with).unwrap_err().starts_with("collection_url must not carry user information"), "{with}");
        }
        // An `@` in the path or the query is no user information.
        for without in ["http://cal.example.com/a@b/", "http://cal.example.com/?who=a@b"] {
            assert_eq!(no_userinfo("collection_url", without), Ok(()), "{without}");
        }
    }
}
