//! Where webhooks may point. `https` only, and never at loopback, private,
//! link-local or otherwise internal addresses: checked when a webhook is
//! registered and again when each delivery connects (the resolver below
//! filters every address it returns), so a DNS record changed later cannot aim
//! deliveries at the internal network. `ALLOW_PRIVATE_WEBHOOK_URLS=true`
//! allows plain `http` and, in `sandbox`, private addresses for local
//! development; in `production` it allows loopback addresses only (a local
//! receiver), never RFC 1918, shared or other internal ranges. Link-local
//! addresses (cloud metadata at 169.254.169.254), in any form an IPv6
//! address can carry an IPv4 one, stay refused everywhere.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use alloy::transports::http::reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use crate::environment::Environment;

/// Which internal addresses webhooks may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Private {
    /// None: public addresses over `https` only.
    #[default]
    Refused,
    /// Loopback addresses, and plain `http`: `production` with
    /// `ALLOW_PRIVATE_WEBHOOK_URLS=true`.
    Loopback,
    /// Every internal address but link-local ones, and plain `http`.
    Allowed,
}

/// Whether private addresses and `http` are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    pub private: Private,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("{0:?} is not a valid URL")]
    Malformed(String),
    #[error("webhook URLs must use https")]
    NotHttps,
    #[error("webhook URLs must not carry credentials")]
    Credentials,
    /// The address is kept for the service's own use and never shown: a
    /// caller learns nothing of what a name resolves to inside.
    #[error("{host} is or resolves to an address webhooks may not reach")]
    Forbidden { host: String, address: IpAddr },
    #[error("{0} does not resolve")]
    Unresolvable(String),
}

impl Policy {
    /// Private addresses and `http` allowed, as `dev` and local receivers need.
    pub const PRIVATE: Policy = Policy { private: Private::Allowed };

    /// `ALLOW_PRIVATE_WEBHOOK_URLS`, before the environment applies (see
    /// [`Policy::within`]).
    pub fn from_env() -> Self {
        let allow = std::env::var("ALLOW_PRIVATE_WEBHOOK_URLS").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
        Self { private: if allow { Private::Allowed } else { Private::Refused } }
    }

    /// The policy in `environment`: `production` narrows private addresses
    /// to loopback ones.
    pub fn within(self, environment: Environment) -> Self {
        match (environment, self.private) {
            (Environment::Production, Private::Allowed) => Self { private: Private::Loopback },
            _ => self,
        }
    }

    /// Checks a URL's shape and every address its host resolves to now
    /// (at registration).
    pub async fn check(&self, text: &str) -> Result<Url, UrlError> {
        let url = self.check_shape(text)?;
        if let Some(Host::Domain(domain)) = url.host() {
            let port = url.port_or_known_default().unwrap_or(443);
            let addresses: Vec<IpAddr> = tokio::net::lookup_host((domain, port))
                .await
                .map_err(|_| UrlError::Unresolvable(domain.to_string()))?
                .map(|a| a.ip())
                .collect();
            if addresses.is_empty() {
                return Err(UrlError::Unresolvable(domain.to_string()));
            }
            for address in addresses {
                self.allow(domain, address)?;
            }
        }
        Ok(url)
    }

    /// Checks a URL without resolving it: scheme, credentials, and the address
    /// when the host is one. At delivery the [`GuardedResolver`] checks what a
    /// name resolves to as it connects, so no second lookup is needed.
    pub fn check_shape(&self, text: &str) -> Result<Url, UrlError> {
        let url = Url::parse(text).map_err(|_| UrlError::Malformed(text.to_string()))?;
        match url.scheme() {
            "https" => {}
            "http" if self.private != Private::Refused => {}
            _ => return Err(UrlError::NotHttps),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials);
        }
        match url.host() {
            None => return Err(UrlError::Malformed(text.to_string())),
            Some(Host::Ipv4(ip)) => self.allow(&ip.to_string(), IpAddr::V4(ip))?,
            Some(Host::Ipv6(ip)) => self.allow(&ip.to_string(), IpAddr::V6(ip))?,
            Some(Host::Domain(_)) => {}
        }
        Ok(url)
    }

    fn allow(&self, host: &str, address: IpAddr) -> Result<(), UrlError> {
        let forbidden = is_link_local(address)
            || match self.private {
                Private::Refused => is_internal(address),
                Private::Loopback => is_internal(address) && !is_loopback(address),
                Private::Allowed => false,
            };
        if forbidden { Err(UrlError::Forbidden { host: host.to_string(), address }) } else { Ok(()) }
    }
}

/// The IPv4 address an IPv6 one carries (compatible `::a.b.c.d`, mapped
/// `::ffff:a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and the
/// local-use `64:ff9b:1::/48`, 6to4 `2002::/16`), which a gateway would take
/// it to.
fn embedded_ipv4(ip: std::net::Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let siit = s[..6] == [0, 0, 0, 0, 0xffff, 0]; // ::ffff:0:a.b.c.d
    let local_nat64 = s[..3] == [0x64, 0xff9b, 1]; // 64:ff9b:1::/48, the last 32 bits at /96
    if s[..6] == [0; 6]
        || s[..6] == [0, 0, 0, 0, 0, 0xffff]
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
        || siit
        || local_nat64
    {
        Some(v4(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(v4(s[1], s[2]))
    } else {
        None
    }
}

fn is_link_local(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(ip) => ip.is_link_local(),
        IpAddr::V6(ip) => {
            ip.is_unicast_link_local() || embedded_ipv4(ip).is_some_and(|v4| v4.is_link_local())
        }
    }
}

/// `127.0.0.0/8` and `::1`, and `::ffff:127.0.0.0/104`, which the system
/// routes to IPv4 loopback.
fn is_loopback(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Loopback, private, shared (CGNAT), benchmarking, reserved, unspecified,
/// broadcast, multicast, documentation, unique-local and site-local
/// addresses, and every IPv6 form that carries an IPv4 address (mapped,
/// compatible, NAT64, 6to4): a gateway would take it to that address,
/// which the policy cannot see.
fn is_internal(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(ip) => {
            let [a, b, ..] = ip.octets();
            ip.is_loopback()
                || ip.is_private()
                || ip.is_unspecified()
                || ip.is_broadcast()
                || ip.is_multicast()
                || ip.is_documentation()
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
                || a >= 240
                || a == 0
        }
        IpAddr::V6(ip) => {
            let segments = ip.segments();
            let embeds_ipv4 = embedded_ipv4(ip).is_some(); // compatible, mapped, SIIT, NAT64, 6to4
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                || ip.is_unique_local()
                || (segments[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
                || embeds_ipv4
        }
    }
}

/// A resolver for the delivery client that drops every address the policy
/// refuses, failing the connection when none is left.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver(pub Policy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                resolved.iter().copied().filter(|a| policy.allow(&host, a.ip()).is_ok()).collect();
            if allowed.is_empty() {
                let error: Box<dyn std::error::Error + Send + Sync> = match resolved.first() {
                    Some(a) => Box::new(UrlError::Forbidden { host, address: a.ip() }),
                    None => Box::new(UrlError::Unresolvable(host)),
                };
                return Err(error);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_internal_addresses_unless_allowed_and_link_local_always() {
        let strict = Policy { private: Private::Refused };
        let dev = Policy::PRIVATE;
        for url in [
            "https://127.0.0.1/hook",
            "https://10.0.0.8/hook",
            "https://192.168.1.1/hook",
            "https://172.16.0.1/hook",
            "https://100.64.0.1/hook",
            "https://[::1]/hook",
            "https://[fd00::1]/hook",
            "https://[::ffff:127.0.0.1]/hook",
            "https://localhost/hook",
            "https://0.0.0.0/hook",
            "https://198.18.0.1/hook",
            "https://198.19.255.254/hook",
            "https://240.0.0.1/hook",
            "https://255.255.255.254/hook",
            "https://[64:ff9b::a00:1]/hook",
            "https://[64:ff9b::5db8:d70e]/hook",
            "https://[::ffff:93.184.215.14]/hook",
            "https://[::a00:1]/hook",
            "https://[::5db8:d70e]/hook",
            "https://[2002:a00:1::1]/hook",
            "https://[2002:5db8:d70e::1]/hook",
            "https://[fec0::1]/hook",
            "https://[feff::1]/hook",
        ] {
            assert!(matches!(strict.check(url).await, Err(UrlError::Forbidden { .. })), "{url}");
        }
        assert_eq!(strict.check("http://93.184.215.14/hook").await, Err(UrlError::NotHttps));
        assert!(strict.check("https://93.184.215.14/hook").await.is_ok());
        assert!(strict.check("https://198.20.0.1/hook").await.is_ok());
        assert!(strict.check("https://[2001:db9::1]/hook").await.is_ok());
        assert_eq!(strict.check("ftp://example.com/").await, Err(UrlError::NotHttps));
        assert_eq!(strict.check("https://user:pw@93.184.215.14/").await, Err(UrlError::Credentials));
        assert!(matches!(strict.check("not a url").await, Err(UrlError::Malformed(_))));

        assert!(matches!(strict.check_shape("https://10.0.0.8/hook"), Err(UrlError::Forbidden { .. })));
        assert!(strict.check_shape("https://hooks.invalid/hook").is_ok(), "names are left to the resolver");
        // At delivery the resolver drops what a name resolves to when forbidden.
        let name: Name = "localhost".parse().unwrap();
        assert!(GuardedResolver(strict).resolve(name).await.is_err());
        let name: Name = "localhost".parse().unwrap();
        assert!(GuardedResolver(dev).resolve(name).await.is_ok());

        assert!(dev.check("http://127.0.0.1:8080/hook").await.is_ok());
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "https://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[::a9fe:a9fe]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://[::ffff:0:a9fe:a9fe]/",
            "http://[64:ff9b:1::a9fe:a9fe]/",
        ] {
            for policy in [dev, dev.within(Environment::Production)] {
                assert!(
                    matches!(policy.check(url).await, Err(UrlError::Forbidden { .. })),
                    "{url} {policy:?}"
                );
            }
            let https = url.replace("http://", "https://");
            assert!(matches!(strict.check(&https).await, Err(UrlError::Forbidden { .. })), "{https}");
        }
    }

    #[tokio::test]
    async fn production_allows_loopback_only_even_when_private_addresses_are_allowed() {
        let production = Policy::PRIVATE.within(Environment::Production);
        assert_eq!(production, Policy { private: Private::Loopback });
        assert_eq!(Policy::PRIVATE.within(Environment::Sandbox), Policy::PRIVATE);
        let strict = Policy::default();
        assert_eq!(strict.within(Environment::Production), strict);
        for url in [
            "http://127.0.0.1:8080/hook",
            "http://127.3.4.5/hook",
            "http://[::1]:9000/hook",
            "http://[::ffff:127.0.0.1]/hook",
            "http://localhost:8080/hook",
        ] {
            assert!(production.check(url).await.is_ok(), "{url}");
        }
        for url in [
            "http://10.0.0.8/hook",
            "https://192.168.1.1/hook",
            "https://172.16.0.1/hook",
            "https://100.64.0.1/hook",
            "https://[fd00::1]/hook",
            "https://[::ffff:10.0.0.8]/hook",
            "https://[64:ff9b::a00:1]/hook",
            "https://0.0.0.0/hook",
        ] {
            assert!(matches!(production.check(url).await, Err(UrlError::Forbidden { .. })), "{url}");
        }
        assert!(production.check("https://93.184.215.14/hook").await.is_ok());
        let name: Name = "localhost".parse().unwrap();
        assert!(GuardedResolver(production).resolve(name).await.is_ok());
    }
}
