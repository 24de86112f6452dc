//! Where webhooks may point. `https` only, and never at loopback, private,
//! link-local or otherwise internal addresses: checked when a webhook is
//! registered and again when each delivery connects (the resolver below
//! filters every address it returns), so a DNS record changed later cannot aim
//! deliveries at the internal network. `ALLOW_PRIVATE_WEBHOOK_URLS=true`
//! allows private addresses and plain `http` for local development; link-local
//! addresses (cloud metadata at 169.254.169.254) stay refused.

use std::net::{IpAddr, SocketAddr};

use alloy::transports::http::reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// Whether private addresses and `http` are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    pub allow_private: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("{0:?} is not a valid URL")]
    Malformed(String),
    #[error("webhook URLs must use https")]
    NotHttps,
    #[error("webhook URLs must not carry credentials")]
    Credentials,
    #[error("{host} resolves to {address}, an address webhooks may not reach")]
    Forbidden { host: String, address: IpAddr },
    #[error("{0} does not resolve")]
    Unresolvable(String),
}

impl Policy {
    pub fn from_env() -> Self {
        let allow = std::env::var("ALLOW_PRIVATE_WEBHOOK_URLS").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
        Self { allow_private: allow }
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
            "http" if self.allow_private => {}
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
        let forbidden = is_link_local(address) || (!self.allow_private && is_internal(address));
        if forbidden { Err(UrlError::Forbidden { host: host.to_string(), address }) } else { Ok(()) }
    }
}

fn is_link_local(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(ip) => ip.is_link_local(),
        IpAddr::V6(ip) => {
            ip.is_unicast_link_local() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
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
            let embeds_ipv4 = segments[..6] == [0; 6] // compatible ::a.b.c.d
                || segments[..6] == [0, 0, 0, 0, 0, 0xffff] // mapped ::ffff:a.b.c.d
                || segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] // NAT64 64:ff9b::/96
                || segments[0] == 0x2002; // 6to4 2002::/16
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
        let strict = Policy { allow_private: false };
        let dev = Policy { allow_private: true };
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
        ] {
            assert!(matches!(dev.check(url).await, Err(UrlError::Forbidden { .. })), "{url}");
        }
    }
}
