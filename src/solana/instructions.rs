//! The few instructions the service builds, encoded by hand from the programs'
//! documented layouts (the `spl-*-interface` crates pull another
//! `solana-pubkey` major): SOL transfers, `CreateIdempotent` of an associated
//! token account and SPL `TransferChecked` (Token and Token-2022 alike).

use solana_instruction::{AccountMeta, Instruction};
use solana_pubkey::Pubkey;

use super::{accounts::ASSOCIATED_TOKEN_PROGRAM, decode::SYSTEM_PROGRAM};

/// A program id constant, parsed.
pub fn key(text: &str) -> Pubkey {
    text.parse().expect("a valid base58 program id")
}

/// The associated token account of `wallet` for `mint` under `program`.
pub fn ata(wallet: &Pubkey, mint: &Pubkey, program: &str) -> Pubkey {
    let program = key(program);
    Pubkey::find_program_address(
        &[wallet.as_ref(), program.as_ref(), mint.as_ref()],
        &key(ASSOCIATED_TOKEN_PROGRAM),
    )
    .0
}

/// Creates `wallet`'s associated token account for `mint` if it does not
/// exist, paid by `payer` (who pays its rent).
pub fn create_ata(payer: &Pubkey, wallet: &Pubkey, mint: &Pubkey, program: &str) -> Instruction {
    Instruction::new_with_bytes(
        key(ASSOCIATED_TOKEN_PROGRAM),
        &[1], // CreateIdempotent
        vec![
            AccountMeta::new(*payer, true),
            AccountMeta::new(ata(wallet, mint, program), false),
            AccountMeta::new_readonly(*wallet, false),
            AccountMeta::new_readonly(*mint, false),
            AccountMeta::new_readonly(key(SYSTEM_PROGRAM), false),
            AccountMeta::new_readonly(key(program), false),
        ],
    )
}

/// SPL `TransferChecked` (tag 12) of `amount` base units from token account
/// `from` to token account `to`, signed by `owner`.
pub fn transfer_checked(
    program: &str,
    from: &Pubkey,
    mint: &Pubkey,
    to: &Pubkey,
    owner: &Pubkey,
    amount: u64,
    decimals: u8,
) -> Instruction {
    let mut data = vec![12];
    data.extend_from_slice(&amount.to_le_bytes());
    data.push(decimals);
    Instruction::new_with_bytes(
        key(program),
        &data,
        vec![
            AccountMeta::new(*from, false),
            AccountMeta::new_readonly(*mint, false),
            AccountMeta::new(*to, false),
            AccountMeta::new_readonly(*owner, true),
        ],
    )
}

/// The size of an SPL Token (or Token-2022, without extensions) mint account.
pub const MINT_LEN: u64 = 82;

/// `InitializeMint2` (tag 20) of `mint`: `decimals`, `authority` mints, no
/// freeze authority. The account must exist (`create_account` of
/// [`MINT_LEN`] bytes owned by `program`).
pub fn initialize_mint2(program: &str, mint: &Pubkey, authority: &Pubkey, decimals: u8) -> Instruction {
    let mut data = vec![20, decimals];
    data.extend_from_slice(authority.as_ref());
    data.push(0);
    Instruction::new_with_bytes(key(program), &data, vec![AccountMeta::new(*mint, false)])
}

/// `MintTo` (tag 7) of `amount` base units of `mint` to token account `to`,
/// unchecked: for tests that place tokens. The service mints with
/// [`mint_to_checked`].
pub fn mint_to(program: &str, mint: &Pubkey, to: &Pubkey, authority: &Pubkey, amount: u64) -> Instruction {
    let mut data = vec![7];
    data.extend_from_slice(&amount.to_le_bytes());
    minting(program, data, mint, to, authority)
}

/// `MintToChecked` (tag 14) of `amount` base units of `mint` to token
/// account `to`: the token program refuses it unless `mint` has `decimals`,
/// so a chain file wrong about them can never mint a different amount.
pub fn mint_to_checked(
    program: &str,
    mint: &Pubkey,
    to: &Pubkey,
    authority: &Pubkey,
    amount: u64,
    decimals: u8,
) -> Instruction {
    let mut data = vec![14];
    data.extend_from_slice(&amount.to_le_bytes());
    data.push(decimals);
    minting(program, data, mint, to, authority)
}

/// A mint instruction's accounts: the mint, the token account credited,
/// and the mint authority, which signs.
fn minting(program: &str, data: Vec<u8>, mint: &Pubkey, to: &Pubkey, authority: &Pubkey) -> Instruction {
    Instruction::new_with_bytes(
        key(program),
        &data,
        vec![
            AccountMeta::new(*mint, false),
            AccountMeta::new(*to, false),
            AccountMeta::new_readonly(*authority, true),
        ],
    )
}

pub fn transfer_sol(from: &Pubkey, to: &Pubkey, lamports: u64) -> Instruction {
    solana_system_interface::instruction::transfer(from, to, lamports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solana::{accounts::associated_token_account, decode::TOKEN_PROGRAM};

    #[test]
    fn the_ata_matches_the_derivation_the_watcher_uses() {
        let (wallet, mint) =
            ("BYh4CfuGDvFMKaZp3RPmkw9y6qg3sWukA2TiGJDeLKZi", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
        let derived = ata(&key(wallet), &key(mint), TOKEN_PROGRAM).to_string();
        assert_eq!(Some(derived), associated_token_account(wallet, mint, TOKEN_PROGRAM));
    }
}
