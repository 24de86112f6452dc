//! What a transfer signs: the call that moves its funds (an EIP-3009
//! authorization signed by the account for the sponsor to send, or a plain
//! transfer), its gas limit, and the signed EIP-1559 transaction.

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::{Decodable2718, Encodable2718},
    primitives::{Address, B256, Bytes, U256, hex, keccak256},
    sol,
    sol_types::{SolCall, SolStruct},
};

use super::{
    EvmSender, TRANSFER_GAS,
    estimate::{self, about_transaction, allowance_beyond_cap},
};
use crate::{
    keys::KeyRef,
    store::now_micros,
    transfers::{Outgoing, Route, SendError, SentTransaction, TxRole, TxState, failure, listed_asset},
};

sol! {
    function transfer(address to, uint256 value) external returns (bool);
    function mint(address to, uint256 value) external;
    function transferWithAuthorization(
        address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce,
        uint8 v, bytes32 r, bytes32 s
    ) external;
    function DOMAIN_SEPARATOR() external view returns (bytes32);
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);

    /// EIP-3009's typed message.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// One call a transfer makes, before fees and nonce.
pub(super) struct Call {
    pub key: KeyRef,
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub input: Bytes,
    /// The EIP-3009 nonce and validBefore (microseconds) it signs, if any.
    pub authorization: Option<(B256, i64)>,
}

impl EvmSender {
    /// The call that moves the funds, signed by the right key.
    pub(super) async fn plan(&self, t: &Outgoing) -> Result<Call, SendError> {
        let destination: Address =
            t.destination_address.parse().map_err(|_| SendError::Invalid("bad destination".into()))?;
        let native = t.currency_symbol == self.config.native.symbol;
        let token = if native {
            None
        } else {
            let asset = listed_asset(&self.config, t)?;
            Some(
                asset
                    .contract_address
                    .parse::<Address>()
                    .map_err(|_| SendError::Invalid("bad token".into()))?,
            )
        };
        let key = self.sender_key(t)?;
        let (to, value, input) = match token {
            None if t.route == Route::Mint => {
                return Err(SendError::Invalid("the native coin is not minted".into()));
            }
            None => (destination, t.amount, Bytes::new()),
            Some(token) if t.route == Route::Mint => {
                (token, U256::ZERO, Bytes::from(mintCall { to: destination, value: t.amount }.abi_encode()))
            }
            Some(token) => (
                token,
                U256::ZERO,
                Bytes::from(transferCall { to: destination, value: t.amount }.abi_encode()),
            ),
        };
        if t.route != Route::Authorization {
            let from = self.signer.evm_address(key)?;
            if from.to_checksum(None) != t.source_address {
                return Err(SendError::Invalid(format!(
                    "the key held for {} signs for {from}, not {}",
                    t.account_id, t.source_address
                )));
            }
            return Ok(Call { key, from, to, value, input, authorization: None });
        }
        let Some(token) = token else {
            return Err(SendError::Invalid("EIP-3009 applies to tokens only".into()));
        };
        self.authorized(t, token, destination).await
    }

    /// The sponsor's call of `transferWithAuthorization` on `token` moving
    /// `t`'s amount from the account to `destination`, under an EIP-3009
    /// authorization the account's key signs.
    async fn authorized(
        &self,
        t: &Outgoing,
        token: Address,
        destination: Address,
    ) -> Result<Call, SendError> {
        let index = t.key_index.ok_or_else(|| SendError::Invalid("no account key".into()))?;
        let owner = self.signer.evm_address(KeyRef::Account(index))?;
        let (nonce, ends) = self.authorization_terms(t).await?;
        let message = TransferWithAuthorization {
            from: owner,
            to: destination,
            value: t.amount,
            validAfter: U256::ZERO,
            validBefore: U256::from(ends / 1_000_000),
            nonce,
        };
        let separator = self.rpc.call(token, Bytes::from(DOMAIN_SEPARATORCall {}.abi_encode())).await?;
        let separator = DOMAIN_SEPARATORCall::abi_decode_returns(&separator)
            .map_err(|e| SendError::Invalid(format!("{} has no EIP-712 domain: {e}", t.currency_symbol)))?;
        let mut digest = Vec::with_capacity(66);
        digest.extend_from_slice(b"\x19\x01");
        digest.extend_from_slice(separator.as_slice());
        digest.extend_from_slice(message.eip712_hash_struct().as_slice());
        let signature = self.signer.sign_evm_hash(KeyRef::Account(index), keccak256(&digest)).await?;
        let call = transferWithAuthorizationCall {
            from: owner,
            to: destination,
            value: t.amount,
            validAfter: U256::ZERO,
            validBefore: message.validBefore,
            nonce,
            v: 27 + u8::from(signature.v()),
            r: signature.r().into(),
            s: signature.s().into(),
        };
        let sponsor = self.signer.evm_address(KeyRef::Sponsor)?;
        Ok(Call {
            key: KeyRef::Sponsor,
            from: sponsor,
            to: token,
            value: U256::ZERO,
            input: Bytes::from(call.abi_encode()),
            authorization: Some((nonce, ends)),
        })
    }

    /// The EIP-3009 nonce and `validBefore` (microseconds) `t` signs: those
    /// it was first given, so that signing it again (an estimate that failed,
    /// its first transaction refused by every node) makes no second
    /// authorization. New ones are kept in the store before they are signed:
    /// an authorization leaves the process with the gas estimate, and a node
    /// that sees it can execute it until `validBefore`.
    async fn authorization_terms(&self, t: &Outgoing) -> Result<(B256, i64), SendError> {
        let (nonce, ends) = match (t.authorization_nonce.clone(), t.window_ends_at) {
            (Some(nonce), Some(ends)) => (nonce, ends),
            _ => {
                let ends = now_micros() + self.config.transfers.window().as_micros() as i64;
                let mut nonce = [0u8; 32];
                getrandom::fill(&mut nonce).map_err(|e| SendError::Invalid(format!("no randomness: {e}")))?;
                let nonce = format!("{:#x}", B256::from(nonce));
                crate::transfers::record::reserve_authorization(&self.store, &t.id, &nonce, ends).await?
            }
        };
        let parsed =
            nonce.parse().map_err(|_| SendError::Invalid(format!("bad authorization nonce {nonce}")))?;
        Ok((parsed, ends))
    }

    /// The key that signs the transfer's transfer and cancellation transactions.
    pub(super) fn sender_key(&self, t: &Outgoing) -> Result<KeyRef, SendError> {
        Ok(match t.route {
            Route::Omnibus => KeyRef::Omnibus,
            Route::Authorization => KeyRef::Sponsor,
            Route::Mint => KeyRef::Issuer,
            Route::Settlement => KeyRef::Settlement,
            Route::TopUp | Route::FeePayer => {
                KeyRef::Account(t.key_index.ok_or_else(|| SendError::Invalid("no account key".into()))?)
            }
        })
    }

    /// The gas limit of [`estimate::gas_limit`]: a call that needs more
    /// than one transaction may carry is refused (`GAS_LIMIT_EXCEEDED`).
    /// Only an answer about the transaction refuses it (see
    /// [`about_transaction`]); the node's own trouble is asked again.
    pub(super) async fn gas_limit(&self, call: &Call) -> Result<u64, SendError> {
        match self.rpc.estimate_gas(call.from, call.to, call.value, &call.input).await {
            Ok(gas) => {
                estimate::gas_limit(gas, call.input.is_empty() && gas == TRANSFER_GAS).ok_or_else(|| {
                    SendError::Refused(failure(
                        "GAS_LIMIT_EXCEEDED",
                        &format!(
                            "the transfer needs {gas} gas, more than the {} one transaction may use",
                            estimate::MAX_TRANSACTION_GAS
                        ),
                    ))
                })
            }
            Err(answer)
                if answer.kind == "rpc_error"
                    && answer.code != Some(3)
                    && allowance_beyond_cap(&answer.message).is_some() =>
            {
                Err(SendError::Refused(failure(
                    "GAS_LIMIT_EXCEEDED",
                    &format!(
                        "the transfer needs more gas than the {} one transaction may use: {}",
                        estimate::MAX_TRANSACTION_GAS,
                        answer.message
                    ),
                )))
            }
            Err(failure)
                if failure.kind == "rpc_error" && about_transaction(failure.code, &failure.message) =>
            {
                Err(SendError::Invalid(format!("the transfer would fail: {}", failure.message)))
            }
            Err(failure) => Err(failure.into()),
        }
    }

    pub(super) fn chain_id(&self) -> u64 {
        self.config.chain_id.unwrap_or_default()
    }

    pub(super) async fn sign(
        &self,
        key: KeyRef,
        tx: TxEip1559,
        role: TxRole,
    ) -> Result<SentTransaction, SendError> {
        let sender = self.signer.evm_address(key)?;
        let signature = self.signer.sign_evm_hash(key, tx.signature_hash()).await?;
        let (nonce, gas_limit, value) = (tx.nonce, tx.gas_limit, tx.value);
        let (max_fee, tip) = (tx.max_fee_per_gas, tx.max_priority_fee_per_gas);
        let envelope = TxEnvelope::from(tx.into_signed(signature));
        let hash = format!("{:#x}", envelope.tx_hash());
        // Nothing was sent yet: only refusals so far.
        self.only_refused.lock().expect("refusal set").insert(hash.clone());
        Ok(SentTransaction {
            hash,
            role,
            sender: sender.to_checksum(None),
            nonce,
            gas_limit,
            value,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip,
            raw: hex::encode_prefixed(envelope.encoded_2718()),
            state: TxState::Sent,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: now_micros(),
        })
    }
}

/// The unsigned EIP-1559 transaction inside stored signed bytes.
pub(super) fn decode(raw: &str) -> Result<TxEip1559, SendError> {
    let bytes = hex::decode(raw).map_err(|_| SendError::Invalid("stored transaction is not hex".into()))?;
    match TxEnvelope::decode_2718(&mut bytes.as_slice()) {
        Ok(TxEnvelope::Eip1559(signed)) => Ok(signed.strip_signature()),
        _ => Err(SendError::Invalid("stored transaction is not EIP-1559".into())),
    }
}
