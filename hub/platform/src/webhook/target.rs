//! Where deliveries may go: `http(s)` URLs whose addresses are public.
//! Private, loopback, link-local and other non-global addresses are
//! refused (SSRF) unless the hub runs in development mode or
//! `HUB_WEBHOOK_ALLOWED_HOSTS` names the host or address. A literal
//! address is checked when the endpoint is saved and at every attempt; a
//! name is checked at every attempt, on the addresses it resolves to then
//! (the client resolves through [`Guard`]), so a name that later points
//! inward is caught.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use hub_kernel::config::Config;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

fn global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn global_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return global_v4(v4);
    }
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || first == 0x2001 && ip.segments()[1] == 0xdb8)
}

/// Whether an address is on the public internet.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => global_v4(v4),
        IpAddr::V6(v6) => global_v6(v6),
    }
}

/// What may be reached: everything in development mode; otherwise global
/// addresses and what the allow-list names.
#[derive(Clone, Debug)]
pub struct Policy {
    any: bool,
    allowed: Arc<Vec<String>>,
}

impl Policy {
    pub fn of(config: &Config) -> Policy {
        let allowed = config.webhook_allowed_hosts.iter().map(|h| h.trim().trim_matches(['[', ']']).to_ascii_lowercase()).filter(|h| !h.is_empty()).collect();
        Policy { any: config.dev, allowed: Arc::new(allowed) }
    }

    fn names(&self, host: &str) -> bool {
        self.any || self.allowed.iter().any(|h| h == &host.trim_matches(['[', ']']).to_ascii_lowercase())
    }

    pub fn admits(&self, host: &str, ip: IpAddr) -> bool {
        is_global(ip) || self.names(host) || self.names(&ip.to_string())
    }
}

/// Checks a URL a tenant or operator is saving for the hub to call:
/// [`check_target`], and no user information (a credential in clear in a
/// column nobody seals and in every log line showing the URL; see
/// `hub_kernel::outbound`). The error is a `ValidationError` detail
/// naming `url`, which callers rename to their field.
pub fn check_url(config: &Config, raw: &str) -> Result<url::Url, String> {
    let url = check_target(config, raw)?;
    hub_kernel::outbound::no_userinfo("url", raw)?;
    Ok(url)
}

/// Checks a URL the hub is about to call (or saving, through
/// [`check_url`]): `http` or `https`, a host, and no address the policy
/// refuses. A URL stored before user information was refused still
/// passes here, so its calls go on.
pub fn check_target(config: &Config, raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|_| "url must be an absolute http or https URL".to_string())?;
    if !matches!(url.scheme(), "http" | "https") || raw.len() > 2000 {
        return Err("url must be an http or https URL of at most 2000 characters".into());
    }
    let policy = Policy::of(config);
    let refused =
        || Err(format!("url must not point at a private, loopback or link-local address ({}); see HUB_WEBHOOK_ALLOWED_HOSTS", url.host_str().unwrap_or("")));
    match url.host() {
        None => Err("url must name a host".into()),
        Some(url::Host::Ipv4(ip)) if !policy.admits(&ip.to_string(), IpAddr::V4(ip)) => refused(),
        Some(url::Host::Ipv6(ip)) if !policy.admits(&ip.to_string(), IpAddr::V6(ip)) => refused(),
        Some(url::Host::Domain(d)) if (d == "localhost" || d.ends_with(".localhost")) && !policy.names(d) => refused(),
        _ => Ok(url),
    }
}

/// The start of every client that calls an address a tenant configured
/// (webhook deliveries, CalDAV pushes, AI providers): no redirects, and
/// the policy's resolver. The caller adds its user agent and timeout.
pub fn guarded_client(config: &Config) -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).dns_resolver(Arc::new(Guard(Policy::of(config))))
}

/// The delivery client's resolver: a name's addresses, less those the
/// policy refuses; none left is an error, so no connection is made.
#[derive(Clone, Debug)]
pub struct Guard(pub Policy);

impl Resolve for Guard {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let admitted: Vec<SocketAddr> = found.into_iter().filter(|a| policy.admits(&host, a.ip())).collect();
            if admitted.is_empty() {
                return Err(format!("{host} resolves only to private, loopback or link-local addresses").into());
            }
            Ok(Box::new(admitted.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dev: bool, allowed: &[&str]) -> Config {
        let mut c = Config::for_tests(std::env::temp_dir(), None);
        c.dev = dev;
        c.webhook_allowed_hosts = allowed.iter().map(|s| s.to_string()).collect();
        c
    }

    #[test]
    fn only_global_addresses_are_reached_outside_development() {
        for inward in
            ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1"]
        {
            assert!(!is_global(inward.parse().unwrap()), "{inward}");
        }
        for outward in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_global(outward.parse().unwrap()), "{outward}");
        }
        let prod = config(false, &[]);
        assert!(check_url(&prod, "https://hooks.example.com/x").is_ok());
        assert!(check_url(&prod, "http://8.8.8.8/x").is_ok());
        for refused in ["http://127.0.0.1:9000/x", "http://169.254.169.254/latest", "http://[::1]/x", "http://localhost/x", "http://api.localhost/x"] {
            assert!(check_url(&prod, refused).unwrap_err().contains("private"), "{refused}");
        }
        for malformed in ["ftp://example.com/x", "example.com/x", "file:///etc/passwd"] {
            assert!(check_url(&prod, malformed).is_err(), "{malformed}");
        }
        for credentialed in ["https://user:PW@hooks.example.com/x", "https://user@hooks.example.com/x"] {
            assert!(check_url(&prod, credentialed).unwrap_err().starts_with("url must not carry user information"), "{credentialed}");
            assert!(check_target(&prod, credentialed).is_ok(), "a stored URL with user information is still called: {credentialed}");
        }
        assert!(check_url(&config(false, &["127.0.0.1", "localhost"]), "http://127.0.0.1:9000/x").is_ok());
        assert!(check_url(&config(false, &["localhost"]), "http://localhost:9000/x").is_ok());
        assert!(check_url(&config(true, &[]), "http://127.0.0.1:9000/x").is_ok(), "development mode reaches anything");
    }
}
