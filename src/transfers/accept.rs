//! Accepting a transfer request: every check before the store's one
//! transaction (destination, asset, amount, account, keys, route, balance),
//! independent of how the request arrived.

use alloy::primitives::U256;

use super::{Created, NewTransfer, Refusal, canonical_request_id, destination, fingerprint, route};
use crate::{
    account::{Account, AccountStatus, AccountType},
    amount::Amount,
    assets::{BalanceError, BalanceReader},
    chain::Chain,
    config::Chains,
    family::seam::{GasBeyondCap, Move},
    keys::{KeyError, KeyRef, Signer},
    rpc::RpcFailure,
    store::{Store, StoreError},
};

/// A transfer request as the client gave it, destination already picked
/// out of the request's two forms.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub organization: &'a str,
    pub request_id: &'a str,
    pub account_id: &'a str,
    pub amount: &'a str,
    pub currency_symbol: &'a str,
    /// The request field the destination came from, to name it in errors.
    pub destination_field: &'a str,
    pub destination: &'a str,
    pub chain: &'a str,
}

/// Why a request was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The request itself is wrong: `400 INVALID_REQUEST`.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Balance(#[from] BalanceError),
    /// The signer cannot derive an address it should.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The transfer's call needs more gas than one transaction may carry:
    /// `400 GAS_LIMIT_EXCEEDED`.
    #[error("{0}")]
    GasLimit(GasBeyondCap),
    /// The node did not answer the gas estimate, asked three times: `503`.
    #[error("cannot estimate the transfer's gas: {0}")]
    Estimate(RpcFailure),
}

fn invalid(message: impl Into<String>) -> AcceptError {
    AcceptError::Invalid(message.into())
}

/// What acceptance reads: the store, the chains, the balances and the keys.
pub struct Acceptance<'a> {
    pub store: &'a Store,
    pub chains: &'a Chains,
    pub balances: &'a BalanceReader,
    pub signer: &'a dyn Signer,
}

impl Acceptance<'_> {
    /// Validates `request` and accepts it exactly once per request id (see
    /// [`super::hold::create`]). The same request again is answered from
    /// its transfer before anything that transfer changed (the account's
    /// balance and holds, its status) is checked again.
    pub async fn accept(&self, request: &Request<'_>) -> Result<Created, AcceptError> {
        let parsed = self.parse(request)?;
        let print = fingerprint(
            request.account_id,
            parsed.chain,
            &parsed.destination,
            request.currency_symbol,
            &parsed.amount,
        );
        if let Some(answer) =
            self.store.repeated_request(request.organization, &parsed.request_id, &print).await?
        {
            return Ok(answer?);
        }
        let (new, balance) = self.prepared(request, parsed).await?;
        Ok(super::hold::create(self.store, &new, balance).await?)
    }

    /// Validates `request` as [`Acceptance::accept`] does, without
    /// accepting it: the transfer to hold and the source's balance, for a
    /// caller that holds it in a transaction of its own (an off-ramp's).
    pub async fn prepare(&self, request: &Request<'_>) -> Result<(NewTransfer, U256), AcceptError> {
        let parsed = self.parse(request)?;
        self.prepared(request, parsed).await
    }

    /// What `request` asks, parsed against the chains.
    fn parse(&self, request: &Request<'_>) -> Result<Parsed, AcceptError> {
        let request_id = canonical_request_id(request.request_id)
            .ok_or_else(|| invalid(format!("request_id {:?} is not a UUID", request.request_id)))?;
        let chain: Chain =
            request.chain.parse().map_err(|e: crate::chain::UnknownChain| invalid(e.to_string()))?;
        let config = self
            .chains
            .get(chain)
            .map_err(|_| invalid(format!("{chain} is not configured on this service")))?;
        if config.transfers.native_usd_micros().is_none() {
            return Err(invalid(format!(
                "transfers on {chain} are disabled: no native_usd price is configured for the gas ledger"
            )));
        }
        let destination = destination(chain, request.destination)
            .map_err(|e| invalid(format!("{}: {e}", request.destination_field)))?;
        let symbol = request.currency_symbol;
        let decimals = config
            .decimals_of(symbol)
            .ok_or_else(|| invalid(format!("currency_symbol: {symbol} is not supported on {chain}")))?;
        let amount = Amount::parse(request.amount, decimals).map_err(|e| invalid(format!("amount: {e}")))?;
        if amount.is_zero() {
            return Err(invalid("amount: must be positive"));
        }
        Ok(Parsed { request_id, chain, destination, decimals, amount })
    }

    /// The transfer `parsed` makes from the account, and its balance.
    async fn prepared(
        &self,
        request: &Request<'_>,
        parsed: Parsed,
    ) -> Result<(NewTransfer, U256), AcceptError> {
        let Parsed { request_id, chain, destination, decimals, amount } = parsed;
        let config = self.chains.get(chain).map_err(|_| invalid(format!("{chain} is not configured")))?;
        let symbol = request.currency_symbol;
        let account = self.store.organization_account(request.organization, request.account_id).await?;
        if account.status != AccountStatus::Active {
            return Err(Refusal::NotActive(account.id, account.status).into());
        }
        // Judged before any node is asked, so a refusal is its 4xx even
        // while the chain's node does not answer; judged again under the
        // account's lock when the transfer is held.
        if let Some(status) =
            self.store.identity_not_transacting(request.organization, &account.identity_id).await?
        {
            return Err(Refusal::IdentityNotActive(account.id, status).into());
        }
        let source = address_on(&account, chain)
            .ok_or_else(|| invalid(format!("account {} has no address on {chain}", account.id)))?;
        if source == destination {
            return Err(invalid("the destination is the account's own address"));
        }
        let native = symbol == config.native.symbol;
        let key_index = self.key_index(&account, chain, &source).await?;
        let eip3009 = config.assets.iter().any(|a| a.symbol == symbol && a.eip3009);
        let route = route(account.kind, chain.family(), eip3009 && !native);
        let mut balance = self.balance(&account, chain, symbol, decimals).await?;
        if native && route == super::Route::TopUp {
            // The sponsor's gas money at the address is not the account's.
            balance = balance.saturating_sub(self.store.sponsored_gas_left(chain, &source).await?);
        }
        let token = config.assets.iter().find(|a| !native && a.symbol == symbol);
        let call = Move {
            from: &source,
            to: &destination,
            token: token.map(|a| a.contract_address.as_str()),
            amount: amount.raw(),
        };
        if let Some(beyond) =
            self.balances.gas_beyond_cap(chain, &call).await.map_err(AcceptError::Estimate)?
        {
            return Err(AcceptError::GasLimit(beyond));
        }
        let new = NewTransfer {
            organization: request.organization.to_string(),
            request_id,
            account_id: account.id.clone(),
            chain,
            source_address: source,
            destination_address: destination,
            currency_symbol: symbol.to_string(),
            amount,
            route,
            key_index,
        };
        Ok((new, balance))
    }

    /// The derivation index of the key that signs for `source`, `None` for
    /// the omnibus wallet; refused unless the service's key is `source`'s.
    async fn key_index(
        &self,
        account: &Account,
        chain: Chain,
        source: &str,
    ) -> Result<Option<u32>, AcceptError> {
        match account.kind {
            AccountType::Omnibus => {
                if self.address_of(chain, KeyRef::Omnibus)? != source {
                    return Err(invalid(format!(
                        "omnibus account {} does not hold the omnibus wallet's address on {chain}",
                        account.id
                    )));
                }
                Ok(None)
            }
            AccountType::Segregated => {
                let index = self.store.account_key(&account.id).await?.ok_or_else(|| {
                    invalid(format!("account {} is watch-only: the service holds no key for it", account.id))
                })?;
                if self.address_of(chain, KeyRef::Account(index))? != source {
                    return Err(invalid(format!("account {}'s key does not match its address", account.id)));
                }
                Ok(Some(index))
            }
        }
    }

    /// What the chain holds of `symbol` at the account's addresses on `chain`,
    /// in the smallest unit.
    async fn balance(
        &self,
        account: &Account,
        chain: Chain,
        symbol: &str,
        decimals: u8,
    ) -> Result<U256, AcceptError> {
        let balances = self.balances.balances(account, Some(chain), |_, _| Default::default()).await?;
        Ok(balances
            .iter()
            .find(|b| b.symbol == symbol)
            .and_then(|b| Amount::parse(&b.total, decimals).ok())
            .map_or(U256::ZERO, |a| a.raw()))
    }

    fn address_of(&self, chain: Chain, key: KeyRef) -> Result<String, KeyError> {
        crate::family::keys::key_address(self.signer, chain.family(), key)
    }
}

/// A request's fields, parsed.
struct Parsed {
    request_id: String,
    chain: Chain,
    destination: String,
    decimals: u8,
    amount: Amount,
}

/// The account's address on `chain`.
fn address_on(account: &Account, chain: Chain) -> Option<String> {
    account.addresses.iter().find(|a| a.chains.contains(&chain)).map(|a| a.address.clone())
}
