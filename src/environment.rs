//! Where the service runs. In `sandbox` the platform's counterparties are
//! simulated (the sandbox compliance provider decides, its magic values
//! apply); in `production` nothing is: compliance decisions come from
//! operators (or a real provider) alone. A store keeps the environment
//! `run` or `serve` first started it in, so that identities the sandbox
//! approved never reach production.

use std::{fmt, path::Path, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::chain::Chain;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    Sandbox,
    Production,
}

/// The variable that sets the environment of `run` and `serve`.
pub const ENVIRONMENT_ENV: &str = "CUSTODY_INDEXER_ENVIRONMENT";

impl Environment {
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Sandbox => "sandbox",
            Environment::Production => "production",
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Environment {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "sandbox" => Ok(Environment::Sandbox),
            "production" => Ok(Environment::Production),
            other => Err(format!("unknown environment {other:?}: sandbox or production")),
        }
    }
}

/// Why `run` or `serve` refuses a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentError {
    #[error(
        "the store was first started in {stored}, and this process runs in {requested}: a store keeps one \
         environment (identities the sandbox approved must never reach production); start with \
         --environment {stored} ({ENVIRONMENT_ENV}={stored}) or use another store"
    )]
    Mismatch { stored: Environment, requested: Environment },
    #[error(
        "the store has no environment yet, and its audit trail holds decisions of the sandbox compliance \
         provider: start it once with an explicit --environment ({ENVIRONMENT_ENV}): sandbox to go on trying \
         it out, production only if the identities it approved may be taken into production"
    )]
    SandboxDecisions,
}

/// The environment a process runs in, from the store's stamp (`stored`),
/// the one asked for (`requested`, `None` when left to the default,
/// `production`) and whether an unstamped store's audit trail holds sandbox
/// decisions. An unstamped store takes the environment it is started in.
pub fn on_start(
    stored: Option<Environment>,
    requested: Option<Environment>,
    sandbox_decisions: bool,
) -> Result<Environment, EnvironmentError> {
    let chosen = requested.unwrap_or(Environment::Production);
    match stored {
        Some(stored) if stored != chosen => Err(EnvironmentError::Mismatch { stored, requested: chosen }),
        Some(stored) => Ok(stored),
        None if requested.is_none() && sandbox_decisions => Err(EnvironmentError::SandboxDecisions),
        None => Ok(chosen),
    }
}

/// A configured chain as the sandbox's rule sees it: its file, whether it
/// is a mainnet (by its name, or by the network its chain id or genesis
/// hash names: a test chain's file pointed at a mainnet is one), and the
/// stablecoins that file lists as the platform's issued ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured<'a> {
    pub chain: Chain,
    pub source: &'a Path,
    pub mainnet: bool,
    pub issued: Vec<&'a str>,
}

/// Why a sandbox refuses to start with its chains.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainsError {
    #[error(
        "{chain} is a mainnet (by its name, or by the chain id or genesis hash of its file), named with \
         --chain: a sandbox follows test chains only; name a test chain, or run in production"
    )]
    MainnetNamed { chain: Chain },
    #[error(
        "chain file {file} lists {symbol} on {chain}, a mainnet, as an issued stablecoin (issued = true): a \
         sandbox mints for every simulated wire, which would mint real stablecoin; remove the line or the file \
         from the chain files (CUSTODY_INDEXER_CHAINS), or run in production"
    )]
    IssuedOnMainnet { chain: Chain, file: String, symbol: String },
}

/// The chains a process in `environment` follows, of the `configured`
/// ones: those `named` with `run --chain`, every configured one when none
/// is named. A sandbox never touches real money: it refuses to start when
/// any configured mainnet file lists an issued stablecoin (whatever is
/// named: `serve` mints for simulated wires too) or when a mainnet is named,
/// and follows only the test chains when none is. Production follows what
/// it is given.
pub fn chains_to_follow(
    environment: Environment,
    configured: &[Configured<'_>],
    named: &[Chain],
) -> Result<Vec<Chain>, ChainsError> {
    let chosen = |keep: &dyn Fn(Chain) -> bool| -> Vec<Chain> {
        if named.is_empty() {
            configured.iter().map(|c| c.chain).filter(|c| keep(*c)).collect()
        } else {
            named.to_vec()
        }
    };
    if environment == Environment::Production {
        return Ok(chosen(&|_| true));
    }
    for config in configured.iter().filter(|c| c.mainnet) {
        if let Some(symbol) = config.issued.first() {
            return Err(ChainsError::IssuedOnMainnet {
                chain: config.chain,
                file: config.source.display().to_string(),
                symbol: symbol.to_string(),
            });
        }
    }
    let mainnet =
        |chain: Chain| configured.iter().any(|c| c.chain == chain && c.mainnet) || chain.is_mainnet();
    if let Some(chain) = named.iter().find(|c| mainnet(**c)) {
        return Err(ChainsError::MainnetNamed { chain: *chain });
    }
    Ok(chosen(&|c| !mainnet(c)))
}

#[cfg(test)]
mod tests {
    use super::{Environment::*, EnvironmentError::*, *};

    #[test]
    fn a_sandbox_follows_test_chains_and_never_mints_on_a_mainnet() {
        use Chain::{
            EthereumMainnet as Eth, EthereumTestnet as Sepolia, SolanaDevnet as Devnet, SolanaMainnet as Sol,
        };
        let file = |chain: Chain, issued: &'static [&'static str]| Configured {
            chain,
            source: Path::new("chains/x.toml"),
            mainnet: chain.is_mainnet(),
            issued: issued.to_vec(),
        };
        // A test chain's file whose chain id is a mainnet's.
        let disguised = Configured { mainnet: true, ..file(Sepolia, &[]) };
        let plain = [file(Eth, &[]), file(Sepolia, &["USDC"]), file(Sol, &[]), file(Devnet, &["USDC"])];
        let minting = [file(Eth, &["USDC"]), file(Sepolia, &["USDC"])];
        let issued = || ChainsError::IssuedOnMainnet {
            chain: Eth,
            file: "chains/x.toml".into(),
            symbol: "USDC".into(),
        };
        type Case<'a> = (Environment, &'a [Configured<'a>], &'a [Chain], Result<Vec<Chain>, ChainsError>);
        let disguised = [disguised, file(Devnet, &[])];
        let cases: [Case; 13] = [
            (Production, &plain, &[], Ok(vec![Eth, Sepolia, Sol, Devnet])),
            (Production, &plain, &[Sol], Ok(vec![Sol])),
            (Production, &minting, &[], Ok(vec![Eth, Sepolia])),
            (Production, &minting, &[Eth], Ok(vec![Eth])),
            (Sandbox, &plain, &[], Ok(vec![Sepolia, Devnet])),
            (Sandbox, &plain, &[Devnet], Ok(vec![Devnet])),
            (Sandbox, &plain, &[Sepolia, Sol], Err(ChainsError::MainnetNamed { chain: Sol })),
            (Sandbox, &minting, &[], Err(issued())),
            // Naming only the test chain does not make the mainnet file safe:
            // `serve` and a later `run` read it too.
            (Sandbox, &minting, &[Sepolia], Err(issued())),
            (Sandbox, &[file(Eth, &[])], &[], Ok(vec![])),
            (Sandbox, &disguised, &[], Ok(vec![Devnet])),
            (Sandbox, &disguised, &[Sepolia], Err(ChainsError::MainnetNamed { chain: Sepolia })),
            (Production, &disguised, &[Sepolia], Ok(vec![Sepolia])),
        ];
        for (environment, configured, named, outcome) in cases {
            assert_eq!(chains_to_follow(environment, configured, named), outcome, "{environment} {named:?}");
        }
        let message = issued().to_string();
        assert!(
            message.contains("chains/x.toml")
                && message.contains("ETHEREUM_MAINNET")
                && message.contains("USDC")
        );
        let message = ChainsError::MainnetNamed { chain: Sol }.to_string();
        assert!(message.contains("SOLANA_MAINNET") && message.contains("--chain"), "{message}");
    }

    #[test]
    fn a_store_keeps_the_environment_it_was_first_started_in() {
        let cases = [
            // (stored, requested, sandbox decisions) → outcome
            (None, None, false, Ok(Production)),
            (None, Some(Sandbox), false, Ok(Sandbox)),
            (None, Some(Production), false, Ok(Production)),
            (None, None, true, Err(SandboxDecisions)),
            (None, Some(Sandbox), true, Ok(Sandbox)),
            (None, Some(Production), true, Ok(Production)),
            (Some(Production), None, true, Ok(Production)),
            (Some(Production), Some(Production), false, Ok(Production)),
            (
                Some(Production),
                Some(Sandbox),
                false,
                Err(Mismatch { stored: Production, requested: Sandbox }),
            ),
            (Some(Sandbox), Some(Sandbox), true, Ok(Sandbox)),
            (Some(Sandbox), None, true, Err(Mismatch { stored: Sandbox, requested: Production })),
            (
                Some(Sandbox),
                Some(Production),
                false,
                Err(Mismatch { stored: Sandbox, requested: Production }),
            ),
        ];
        for (stored, requested, decisions, outcome) in cases {
            assert_eq!(
                on_start(stored, requested, decisions),
                outcome,
                "{stored:?} {requested:?} {decisions}"
            );
        }
    }

    #[test]
    fn a_refusal_names_both_environments_and_the_flag() {
        let message = Mismatch { stored: Sandbox, requested: Production }.to_string();
        assert!(message.contains("first started in sandbox") && message.contains("runs in production"));
        assert!(message.contains("--environment sandbox"), "{message}");
        assert_eq!("production".parse(), Ok(Production));
        assert!("Production".parse::<Environment>().is_err());
    }
}
