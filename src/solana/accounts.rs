//! The token accounts a wallet receives tokens on: a transfer into a wallet's
//! associated token account does not list the wallet among the
//! transaction's accounts, so the signatures strategy polls these too.

use std::str::FromStr;

use solana_pubkey::Pubkey;

use super::decode::{TOKEN_2022_PROGRAM, TOKEN_PROGRAM};

pub const ASSOCIATED_TOKEN_PROGRAM: &str = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL";

/// The associated token account of `wallet` for `mint` under `token_program`.
pub fn associated_token_account(wallet: &str, mint: &str, token_program: &str) -> Option<String> {
    let (wallet, mint, program) =
        (Pubkey::from_str(wallet).ok()?, Pubkey::from_str(mint).ok()?, Pubkey::from_str(token_program).ok()?);
    let ata_program = Pubkey::from_str(ASSOCIATED_TOKEN_PROGRAM).ok()?;
    let (address, _) =
        Pubkey::find_program_address(&[wallet.as_ref(), program.as_ref(), mint.as_ref()], &ata_program);
    Some(address.to_string())
}

/// Associated token accounts of a wallet for every mint, under both token
/// programs (a mint's program can change between deployments).
pub fn associated_token_accounts<'a>(wallet: &str, mints: impl Iterator<Item = &'a str>) -> Vec<String> {
    mints
        .flat_map(|mint| {
            [TOKEN_PROGRAM, TOKEN_2022_PROGRAM].map(|program| associated_token_account(wallet, mint, program))
        })
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_the_associated_token_accounts_seen_on_mainnet() {
        // Key 1 of usdc-transfer-creates-ata.LPaVYsnh is the USDC account it
        // created for wallet 9fE6…; token2022-transfer-creates-ata.4G24SgaZ likewise.
        let usdc = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
        assert_eq!(
            associated_token_account("9fE6zKgca6K2EEa3yjbcq7zGMusUNqSQeWQNL2YDZ2Yi", usdc, TOKEN_PROGRAM)
                .as_deref(),
            Some("FrbudWWrsiv5deKG483U91njmeFPV45s3DQUfjhDD2BZ")
        );
        let help = "HeLp6NuQkmYB4pYWo2zYs22mESHXPQYzXbB8n4V98jwC";
        assert_eq!(
            associated_token_account(
                "BYh4CfuGDvFMKaZp3RPmkw9y6qg3sWukA2TiGJDeLKZi",
                help,
                TOKEN_2022_PROGRAM
            )
            .as_deref(),
            Some("5k4KRS1HVR5DaQhPzY3P9mRBw1k3TK7fug23utRcqgk1")
        );
        assert!(associated_token_account("not a key", usdc, TOKEN_PROGRAM).is_none());
        let both =
            associated_token_accounts("9fE6zKgca6K2EEa3yjbcq7zGMusUNqSQeWQNL2YDZ2Yi", [usdc].into_iter());
        assert_eq!(both.len(), 2);
        assert_ne!(both[0], both[1]);
    }
}
