//! Instructions that move lamports into an account, top-level or by CPI, in
//! `json` (compiled) and `jsonParsed` form:
//!
//! - the system program's `Transfer` and `TransferWithSeed`: from the payer;
//! - the token programs' `CloseAccount` and `UnwrapLamports` (Token and
//!   Token-2022): from the owner of the token account paying out, as
//!   `preTokenBalances` names it (else the signing authority). When that
//!   owner is the receiving wallet itself, the lamports were already its own.

use serde_json::Value;
use solana_transaction_status_client_types::{
    UiInstruction, UiMessage, UiParsedInstruction, UiTransactionStatusMeta,
    option_serializer::OptionSerializer,
};

use super::{SYSTEM_PROGRAM, TOKEN_2022_PROGRAM, TOKEN_PROGRAM};

/// Lamports moved from `from`'s funds into `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    /// The party whose lamports moved: the payer of a transfer, the owner of
    /// a closed or unwrapped token account.
    pub from: String,
    pub to: String,
    pub lamports: u64,
}

/// The token program instructions that pay out a token account's lamports.
const CLOSE_ACCOUNT: u8 = 9;
const UNWRAP_LAMPORTS: u8 = 45;

/// Every lamport credit of a transaction, outer instructions then inner.
pub(super) fn lamport_credits(
    message: &UiMessage,
    meta: &UiTransactionStatusMeta,
    keys: &[String],
) -> Vec<Credit> {
    let context = Context { meta, keys };
    let mut out: Vec<Credit> = match message {
        UiMessage::Parsed(parsed) => {
            parsed.instructions.iter().filter_map(|ix| context.instruction(ix)).collect()
        }
        UiMessage::Raw(raw) => raw
            .instructions
            .iter()
            .filter_map(|ix| {
                let accounts: Vec<Option<&str>> = ix.accounts.iter().map(|i| context.key(*i)).collect();
                context.compiled(context.key(ix.program_id_index), &accounts, &ix.data)
            })
            .collect(),
    };
    if let OptionSerializer::Some(inner) = &meta.inner_instructions {
        out.extend(
            inner.iter().flat_map(|set| set.instructions.iter()).filter_map(|ix| context.instruction(ix)),
        );
    }
    out
}

struct Context<'a> {
    meta: &'a UiTransactionStatusMeta,
    keys: &'a [String],
}

impl Context<'_> {
    fn key(&self, index: u8) -> Option<&str> {
        self.keys.get(usize::from(index)).map(String::as_str)
    }

    fn instruction(&self, ix: &UiInstruction) -> Option<Credit> {
        match ix {
            UiInstruction::Compiled(c) => {
                let accounts: Vec<Option<&str>> = c.accounts.iter().map(|i| self.key(*i)).collect();
                self.compiled(self.key(c.program_id_index), &accounts, &c.data)
            }
            UiInstruction::Parsed(UiParsedInstruction::PartiallyDecoded(p)) => {
                let accounts: Vec<Option<&str>> = p.accounts.iter().map(|a| Some(a.as_str())).collect();
                self.compiled(Some(&p.program_id), &accounts, &p.data)
            }
            UiInstruction::Parsed(UiParsedInstruction::Parsed(p)) => {
                let kind = p.parsed.get("type")?.as_str()?;
                let info = p.parsed.get("info")?;
                let text = |field: &str| info.get(field).and_then(Value::as_str);
                match (p.program_id.as_str(), kind) {
                    (SYSTEM_PROGRAM, "transfer" | "transferWithSeed") => Some(Credit {
                        from: text("source")?.to_string(),
                        to: text("destination")?.to_string(),
                        lamports: info.get("lamports")?.as_u64()?,
                    }),
                    (TOKEN_PROGRAM | TOKEN_2022_PROGRAM, "closeAccount") => self.payout(
                        text("account")?,
                        text("destination")?,
                        text("owner").or(text("multisigOwner")),
                    ),
                    (TOKEN_PROGRAM | TOKEN_2022_PROGRAM, "unwrapLamports") => self.payout(
                        text("source")?,
                        text("destination")?,
                        text("authority").or(text("multisigAuthority")),
                    ),
                    _ => None,
                }
            }
        }
    }

    /// Decodes a compiled instruction from its base58 data: system
    /// `Transfer` (2: from, to) and `TransferWithSeed` (11: from, base, to);
    /// token `CloseAccount` and `UnwrapLamports` (account, destination,
    /// authority).
    fn compiled(&self, program: Option<&str>, accounts: &[Option<&str>], data: &str) -> Option<Credit> {
        let program = program?;
        if program != SYSTEM_PROGRAM && program != TOKEN_PROGRAM && program != TOKEN_2022_PROGRAM {
            return None;
        }
        let data = bs58::decode(data).into_vec().ok()?;
        let account = |i: usize| accounts.get(i).copied().flatten();
        if program == SYSTEM_PROGRAM {
            let kind = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?);
            let lamports = u64::from_le_bytes(data.get(4..12)?.try_into().ok()?);
            let (from, to) = match kind {
                2 => (account(0)?, account(1)?),
                11 => (account(0)?, account(2)?),
                _ => return None,
            };
            return Some(Credit { from: from.to_string(), to: to.to_string(), lamports });
        }
        match *data.first()? {
            CLOSE_ACCOUNT | UNWRAP_LAMPORTS => self.payout(account(0)?, account(1)?, account(2)),
            _ => None,
        }
    }

    /// A token account paying its lamports out to `destination`: from its
    /// owner before the transaction, else from the authority that signed;
    /// the amount is what the token account lost.
    fn payout(&self, account: &str, destination: &str, authority: Option<&str>) -> Option<Credit> {
        let index = self.keys.iter().position(|k| k == account)?;
        let owner = match &self.meta.pre_token_balances {
            OptionSerializer::Some(balances) => balances
                .iter()
                .find(|b| usize::from(b.account_index) == index)
                .and_then(|b| b.owner.as_ref().map(|o| o.as_str())),
            _ => None,
        };
        let pre = self.meta.pre_balances.get(index)?;
        let post = self.meta.post_balances.get(index)?;
        Some(Credit {
            from: owner.or(authority)?.to_string(),
            to: destination.to_string(),
            lamports: pre.saturating_sub(*post),
        })
    }
}
