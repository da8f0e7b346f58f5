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

/// Judged against the IANA IPv4 special-purpose address registry: a block
/// whose "globally reachable" is false is refused, and so are the few
/// blocks marked reachable that no webhook receiver lives in.
fn global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        // 192.0.0.0/24, IETF protocol assignments (DS-Lite, NAT64
        // discovery, the PCP and TURN anycasts among them).
        || (a == 192 && b == 0 && c == 0)
        // 192.88.99.0/24, the deprecated 6to4 relay anycast (RFC 7526).
        || (a == 192 && b == 88 && c == 99)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

/// The IPv4 address an IPv6 address carries and is routed to, for the
/// forms that carry one: IPv4-mapped `::ffff:0:0/96`, IPv4-compatible
/// `::/96` (deprecated; `::` and `::1` fall in it, their IPv4 reading
/// `0.0.0.0`/`0.0.0.1` is refused as well), the NAT64 well-known prefix
/// `64:ff9b::/96` (RFC 6052: a translator forwards to the last 32 bits)
/// and 6to4 `2002::/16` (RFC 3056: bits 16 to 48).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let last = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(last),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)),
        _ => None,
    }
}

/// Judged against the IANA IPv6 special-purpose address registry. An
/// address that carries an IPv4 address ([`embedded_v4`]) is judged by
/// it. Otherwise only global unicast `2000::/3` is global, less
/// `2001::/23` (IETF protocol assignments: Teredo `2001::/32`, whose
/// tunnels reach a client through a server of the operator's choosing and
/// are no webhook receiver, benchmarking `2001:2::/48`, ORCHID
/// `2001:10::/28` and ORCHIDv2 `2001:20::/28`, identifiers that route
/// nowhere, and the anycast services there), documentation `2001:db8::/32`
/// and `3fff::/20`. That leaves out, among others, the unspecified and
/// loopback addresses, `::/8` (SIIT `::ffff:0:0:0/96` too), discard-only
/// `100::/64`, the local-use NAT64 prefix `64:ff9b:1::/48` (RFC 8215: what
/// it translates to is the network's own choice, so it is not judged by
/// the address it carries), SRv6 SIDs `5f00::/16`, unique-local
/// `fc00::/7`, link-local `fe80::/10`, site-local `fec0::/10` and
/// multicast `ff00::/8`.
fn global_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return global_v4(v4);
    }
    let s = ip.segments();
    (s[0] & 0xe000) == 0x2000 && !(s[0] == 0x2001 && s[1] < 0x200) && !(s[0] == 0x2001 && s[1] == 0xdb8) && !(s[0] == 0x3fff && s[1] < 0x1000)
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

/// Why the answer of an outbound call was not read.
#[derive(Debug)]
pub enum Unread {
    /// Longer than the caller's bound (declared, or as it arrived).
    TooLong,
    /// The connection failed while the answer was read.
    Failed(reqwest::Error),
}

/// Reads the answer of an outbound call, at most `max` bytes: a declared
/// length above it is refused before a byte is read, and an answer that
/// grows past it as soon as it does, so a peer cannot make the hub hold
/// more than `max` for it.
pub async fn read_bounded(mut res: reqwest::Response, max: usize) -> Result<Vec<u8>, Unread> {
    if res.content_length().is_some_and(|n| n > max as u64) {
        return Err(Unread::TooLong);
    }
    let mut body = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(Unread::Failed)? {
        if body.len() + chunk.len() > max {
            return Err(Unread::TooLong);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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
    fn ipv6_forms_that_carry_an_ipv4_address_are_judged_by_it() {
        let refused = [
            // NAT64 (RFC 6052) of 127.0.0.1, 169.254.169.254, 10.0.0.1.
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            // The local-use NAT64 prefix: refused whatever it carries.
            "64:ff9b:1::8.8.8.8",
            "64:ff9b:1:ffff::1",
            // IPv4-compatible (deprecated) and IPv4-mapped.
            "::127.0.0.1",
            "::169.254.169.254",
            "::ffff:10.1.2.3",
            // SIIT's IPv4-translated form is in ::/8.
            "::ffff:0:808:808",
            // 6to4 of 127.0.0.1, 192.168.1.1, 169.254.169.254.
            "2002:7f00:1::1",
            "2002:c0a8:101::",
            "2002:a9fe:a9fe:1234::1",
            // Teredo, with a public server and client (8.8.8.8 and 1.1.1.1 inverted): refused all the same.
            "2001:0:808:808:0:0:fefe:fefe",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        ];
        for inward in refused {
            assert!(!is_global(inward.parse().unwrap()), "{inward}");
        }
        let carried = ["64:ff9b::8.8.8.8", "64:ff9b::101:101", "::ffff:8.8.8.8", "2002:808:808::1"];
        for outward in carried {
            assert!(is_global(outward.parse().unwrap()), "{outward}");
        }
    }

    #[test]
    fn ipv6_special_purpose_blocks_are_not_global() {
        let refused = [
            "::",
            "::1",
            "::2:3:4:5:6",
            "100::1",
            "100::ffff:ffff:ffff:ffff",
            "100:0:0:1::1",
            "2001::1",
            "2001:1::1",
            "2001:2::1",
            "2001:3::1",
            "2001:4:112::1",
            "2001:10::1",
            "2001:20::1",
            "2001:2f::1",
            "2001:30::1",
            "2001:1ff:ffff::1",
            "2001:db8::1",
            "3fff::1",
            "3fff:fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            "ff0e::1",
            "4000::1",
            "1fff::1",
        ];
        for inward in refused {
            assert!(!is_global(inward.parse().unwrap()), "{inward}");
        }
        for outward in ["2606:4700::1111", "2001:200::1", "2001:4860:4860::8888", "2620:4f:8000::1", "3fff:1000::1", "2a00:1450::1"] {
            assert!(is_global(outward.parse().unwrap()), "{outward}");
        }
        let prod = config(false, &[]);
        for refused in
            ["http://[64:ff9b::7f00:1]/x", "http://[2002:a9fe:a9fe::1]/x", "http://[2001:0:808:808::fefe:fefe]/x", "http://[fec0::1]/x", "http://[100::1]/x"]
        {
            assert!(check_url(&prod, refused).unwrap_err().contains("private"), "{refused}");
        }
        assert!(check_url(&config(false, &["64:ff9b::7f00:1"]), "http://[64:ff9b::7f00:1]/x").is_ok(), "the allow-list names an address");
    }

    #[test]
    fn ipv4_special_purpose_blocks_are_not_global() {
        for inward in ["192.0.0.1", "192.0.0.170", "192.88.99.1", "198.18.0.1", "192.0.2.1", "240.0.0.1", "255.255.255.255"] {
            assert!(!is_global(inward.parse().unwrap()), "{inward}");
        }
        for outward in ["192.0.1.1", "192.88.98.1", "192.31.196.1", "9.9.9.9"] {
            assert!(is_global(outward.parse().unwrap()), "{outward}");
        }
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
