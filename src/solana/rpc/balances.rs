//! What reconciliation asks a Solana node: balances at `confirmed` (the
//! lamports of up to a hundred wallets in one request), each with the
//! slot it is the balance at (the answer's `context.slot`), which
//! the caller waits to see finalized. (A node's `finalized` answer may
//! hold a later bank's state than the root slot its context names.)

use serde_json::{Value, json};
use solana_rpc_client_api::request::RpcRequest;

use super::{RpcFailure, SolanaRpc};

/// A balance and the slot it is read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtSlot {
    pub slot: u64,
    pub amount: u128,
    /// The token accounts it sums (none for lamports).
    pub accounts: Vec<String>,
}

/// The wallets one `getMultipleAccounts` reads at most.
pub const ACCOUNTS_PER_CALL: usize = 100;

impl SolanaRpc {
    /// Wallets' lamports at `confirmed`, at most [`ACCOUNTS_PER_CALL`] in
    /// one `getMultipleAccounts`, all at the answer's slot (an account the
    /// chain does not hold has none). An answer without one value per
    /// wallet is malformed.
    pub async fn lamports_at_slot(&self, addresses: &[String]) -> Result<Vec<AtSlot>, RpcFailure> {
        let config = json!({ "commitment": "confirmed", "encoding": "base64", "dataSlice": { "offset": 0, "length": 0 } });
        let answer: Value = self.call(RpcRequest::GetMultipleAccounts, json!([addresses, config])).await?;
        let slot = answer["context"]["slot"].as_u64();
        let values = answer["value"].as_array().filter(|values| values.len() == addresses.len());
        let (slot, values) =
            slot.zip(values).ok_or_else(|| self.malformed("getMultipleAccounts", &answer))?;
        values
            .iter()
            .map(|value| {
                let lamports = if value.is_null() { Some(0) } else { value["lamports"].as_u64() };
                let lamports = lamports.ok_or_else(|| self.malformed("getMultipleAccounts", value))?;
                Ok(AtSlot { slot, amount: u128::from(lamports), accounts: Vec::new() })
            })
            .collect()
    }

    /// A wallet's lamports at `confirmed`.
    pub async fn balance_at_slot(&self, address: &str) -> Result<AtSlot, RpcFailure> {
        let answer: Value =
            self.call(RpcRequest::GetBalance, json!([address, { "commitment": "confirmed" }])).await?;
        let slot = answer["context"]["slot"].as_u64();
        let lamports = answer["value"].as_u64();
        let (slot, lamports) = slot.zip(lamports).ok_or_else(|| self.malformed("getBalance", &answer))?;
        Ok(AtSlot { slot, amount: u128::from(lamports), accounts: Vec::new() })
    }

    /// A wallet's balance of `mint` at `confirmed`: the sum over every
    /// token account it owns for the mint.
    pub async fn token_balance_at_slot(&self, owner: &str, mint: &str) -> Result<AtSlot, RpcFailure> {
        let config = json!({ "encoding": "jsonParsed", "commitment": "confirmed" });
        let answer: Value =
            self.call(RpcRequest::GetTokenAccountsByOwner, json!([owner, { "mint": mint }, config])).await?;
        let slot = answer["context"]["slot"]
            .as_u64()
            .ok_or_else(|| self.malformed("getTokenAccountsByOwner", &answer))?;
        let mut found = AtSlot { slot, amount: 0, accounts: Vec::new() };
        for account in answer["value"].as_array().cloned().unwrap_or_default() {
            let amount = account["account"]["data"]["parsed"]["info"]["tokenAmount"]["amount"].as_str();
            let amount = amount.and_then(|a| a.parse::<u128>().ok());
            let pubkey = account["pubkey"].as_str();
            let (amount, pubkey) =
                amount.zip(pubkey).ok_or_else(|| self.malformed("getTokenAccountsByOwner", &account))?;
            found.amount += amount;
            found.accounts.push(pubkey.to_string());
        }
        Ok(found)
    }
}
