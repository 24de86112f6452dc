//! Query strings parsed strictly into typed values at the edge: an unknown
//! or repeated parameter, or a malformed value, is a `400` that names it.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use serde::{Serialize, de::DeserializeOwned};

use super::error::ApiError;
use crate::chain::{Chain, UnknownChain};

pub struct Params(Vec<(String, String)>);

impl Params {
    /// Parses `raw`, refusing any parameter not in `allowed`.
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()).into_owned().collect();
        if let Some((name, _)) = pairs.iter().find(|(name, _)| !allowed.contains(&name.as_str())) {
            return Err(ApiError::invalid(format!(
                "unknown query parameter {name:?} (expected one of: {})",
                allowed.join(", ")
            )));
        }
        Ok(Self(pairs))
    }

    /// A parameter given at most once.
    pub fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        let mut values = self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(ApiError::invalid(format!("query parameter {name} is given more than once")));
        }
        Ok(first)
    }

    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.one(name)?
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ApiError::invalid(format!("query parameter {name} is required")))
    }

    /// Every value of a parameter that may repeat, comma-separated lists split.
    pub fn list(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// A chain filter: absent or `CHAIN_UNSPECIFIED` filters nothing.
    pub fn chain(&self, name: &str) -> Result<Option<Chain>, ApiError> {
        match self.one(name)?.map(str::parse::<Chain>) {
            None | Some(Err(UnknownChain::Unspecified)) => Ok(None),
            Some(Ok(chain)) => Ok(Some(chain)),
            Some(Err(e)) => Err(ApiError::invalid(format!("{name}: {e}"))),
        }
    }

    pub fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
        self.one(name)?
            .map(|v| {
                DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&Utc)).map_err(|_| {
                    ApiError::invalid(format!(
                        "{name} must be an RFC 3339 date-time such as 2026-01-31T12:00:00Z, got {v:?}"
                    ))
                })
            })
            .transpose()
    }

    /// A page size in `1..=max`, `default` when absent.
    pub fn limit(&self, name: &str, default: u32, max: u32) -> Result<u32, ApiError> {
        let Some(value) = self.one(name)? else { return Ok(default) };
        value.parse::<u32>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            ApiError::invalid(format!("{name} must be an integer from 1 to {max}, got {value:?}"))
        })
    }

    pub fn cursor<T: DeserializeOwned>(&self) -> Result<Option<T>, ApiError> {
        self.one("cursor")?.filter(|v| !v.is_empty()).map(decode_cursor).transpose()
    }
}

/// Cursors are opaque to clients: base64url of a small JSON keyset.
pub fn encode_cursor<T: Serialize>(keyset: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(keyset).expect("keysets serialize"))
}

fn decode_cursor<T: DeserializeOwned>(cursor: &str) -> Result<T, ApiError> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| ApiError::invalid("cursor is not one this API returned"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strictly() {
        let params =
            Params::parse(Some("limit=5&chain=base_sepolia&ids=a,b&ids=c"), &["limit", "chain", "ids"])
                .unwrap();
        assert_eq!(params.limit("limit", 10, 25).unwrap(), 5);
        assert_eq!(params.chain("chain").unwrap(), Some(Chain::BaseSepolia));
        assert_eq!(params.list("ids"), ["a", "b", "c"]);

        let error = |raw: &str| match Params::parse(Some(raw), &["limit", "t", "cursor"]) {
            Err(e) => e.status(),
            Ok(p) => [p.limit("limit", 10, 25).err(), p.time("t").err(), p.cursor::<(i64, String)>().err()]
                .into_iter()
                .flatten()
                .next()
                .expect("an error")
                .status(),
        };
        for raw in
            ["limit=0", "limit=26", "limit=x", "limit=1&limit=2", "t=yesterday", "cursor=abc", "accountId=1"]
        {
            assert_eq!(error(raw), axum::http::StatusCode::BAD_REQUEST, "{raw}");
        }
        let cursor = encode_cursor(&(5i64, "d1"));
        let params = Params::parse(Some(&format!("cursor={cursor}")), &["cursor"]).unwrap();
        assert_eq!(params.cursor::<(i64, String)>().unwrap(), Some((5, "d1".to_string())));
    }
}
