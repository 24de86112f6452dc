//! What a transaction found by `transfers recover` moved, pure: a native
//! payment, a token `transfer`, or a token `transferWithAuthorization`
//! (EIP-3009: sent by the sponsor, the money the authorizing account's),
//! each to be listed under the account whose money moved; anything else
//! (a contract's creation, a mint, a cancellation) moved no account's
//! money by itself and is listed under no organization.

use alloy::primitives::{Address, U256};

/// `transfer(address,uint256)`.
const TRANSFER: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// `transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)`.
const TRANSFER_WITH_AUTHORIZATION: [u8; 4] = [0xe3, 0xee, 0x16, 0x0e];

/// What a transaction moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moved {
    /// The native coin, from the sender.
    Native { to: Address, amount: U256 },
    /// A listed token (by its index among the chain's assets), from `from`.
    Token { asset: usize, from: Address, to: Address, amount: U256 },
    /// Nothing an account owns by itself.
    Other,
}

/// What `sender`'s transaction to `to` carrying `value` and calling
/// `input` moved; `tokens` are the chain's listed token contracts.
pub fn classify(
    sender: Address,
    to: Option<Address>,
    value: U256,
    input: &[u8],
    tokens: &[Address],
) -> Moved {
    let Some(to) = to else { return Moved::Other };
    let word = |i: usize| input.get(4 + 32 * i..4 + 32 * (i + 1));
    let address =
        |i: usize| word(i).filter(|w| w[..12].iter().all(|b| *b == 0)).map(|w| Address::from_slice(&w[12..]));
    let amount = |i: usize| word(i).map(U256::from_be_slice);
    if input.is_empty() {
        return if value.is_zero() || to == sender {
            Moved::Other
        } else {
            Moved::Native { to, amount: value }
        };
    }
    let Some(asset) = tokens.iter().position(|t| *t == to) else { return Moved::Other };
    let token = match &input[..input.len().min(4)] {
        s if s == TRANSFER && input.len() == 4 + 64 => (Some(sender), address(0), amount(1)),
        s if s == TRANSFER_WITH_AUTHORIZATION && input.len() >= 4 + 32 * 9 => {
            (address(0), address(1), amount(2))
        }
        _ => (None, None, None),
    };
    match token {
        (Some(from), Some(to), Some(amount)) if !amount.is_zero() => Moved::Token { asset, from, to, amount },
        _ => Moved::Other,
    }
}

/// The first four bytes of `input`, hex, if it calls anything.
pub fn selector(input: &[u8]) -> Option<String> {
    (input.len() >= 4).then(|| alloy::primitives::hex::encode(&input[..4]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::address;

    fn call(selector: [u8; 4], words: &[U256]) -> Vec<u8> {
        let mut input = selector.to_vec();
        words.iter().for_each(|w| input.extend_from_slice(&w.to_be_bytes::<32>()));
        input
    }

    fn word(a: Address) -> U256 {
        U256::from_be_slice(a.as_slice())
    }

    #[test]
    fn each_kind_of_transaction_names_whose_money_moved() {
        let (omnibus, sponsor, account) = (
            address!("1000000000000000000000000000000000000001"),
            address!("2000000000000000000000000000000000000002"),
            address!("3000000000000000000000000000000000000003"),
        );
        let (token, dest) = (
            address!("4000000000000000000000000000000000000004"),
            address!("5000000000000000000000000000000000000005"),
        );
        let tokens = [address!("9000000000000000000000000000000000000009"), token];
        let seven = U256::from(7);
        let transfer = call(TRANSFER, &[word(dest), seven]);
        let authorization = call(
            TRANSFER_WITH_AUTHORIZATION,
            &[
                word(account),
                word(dest),
                seven,
                U256::ZERO,
                U256::MAX,
                U256::ZERO,
                U256::from(27),
                U256::ZERO,
                U256::ZERO,
            ],
        );
        type Case = (&'static str, Address, Option<Address>, U256, Vec<u8>, Moved);
        let cases: Vec<Case> = vec![
            ("ether", omnibus, Some(dest), seven, vec![], Moved::Native { to: dest, amount: seven }),
            ("a cancellation: zero to itself", omnibus, Some(omnibus), U256::ZERO, vec![], Moved::Other),
            ("a filler with value to itself", omnibus, Some(omnibus), seven, vec![], Moved::Other),
            ("a contract's creation", sponsor, None, U256::ZERO, transfer.clone(), Moved::Other),
            (
                "a token transfer",
                omnibus,
                Some(token),
                U256::ZERO,
                transfer.clone(),
                Moved::Token { asset: 1, from: omnibus, to: dest, amount: seven },
            ),
            (
                "an authorization, the account's money",
                sponsor,
                Some(token),
                U256::ZERO,
                authorization.clone(),
                Moved::Token { asset: 1, from: account, to: dest, amount: seven },
            ),
            ("a token not listed", omnibus, Some(dest), U256::ZERO, transfer.clone(), Moved::Other),
            ("a call cut short", omnibus, Some(token), U256::ZERO, transfer[..40].to_vec(), Moved::Other),
            (
                "another call: a mint",
                sponsor,
                Some(token),
                U256::ZERO,
                call([0x40, 0xc1, 0x0f, 0x19], &[word(dest), seven]),
                Moved::Other,
            ),
            (
                "an address word with high bytes",
                omnibus,
                Some(token),
                U256::ZERO,
                call(TRANSFER, &[U256::MAX, seven]),
                Moved::Other,
            ),
        ];
        for (case, sender, to, value, input, expected) in cases {
            assert_eq!(classify(sender, to, value, &input, &tokens), expected, "{case}");
        }
        assert_eq!(selector(&transfer).as_deref(), Some("a9059cbb"));
        assert_eq!(selector(&[]), None);
    }
}
