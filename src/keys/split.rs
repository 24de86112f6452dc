//! The issuer's key in a backend of its own, every other key in the
//! service's: each call goes to the backend that holds its key.

use alloy::primitives::{Address, B256, Signature};
use futures::future::BoxFuture;

use std::sync::Arc;

use super::{Backend, KeyError, KeyRef, Signer};
use crate::chain::Family;

pub struct Split {
    main: Arc<dyn Signer>,
    issuer: Arc<dyn Signer>,
}

impl Split {
    pub fn new(main: Arc<dyn Signer>, issuer: Arc<dyn Signer>) -> Self {
        Split { main, issuer }
    }

    fn of(&self, key: KeyRef) -> &dyn Signer {
        if key == KeyRef::Issuer { self.issuer.as_ref() } else { self.main.as_ref() }
    }
}

impl Signer for Split {
    fn backend(&self) -> Backend {
        Backend::Split { main: Box::new(self.main.backend()), issuer: Box::new(self.issuer.backend()) }
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        self.of(key).evm_address(key)
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        self.of(key).solana_address(key)
    }

    fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        self.of(key).holds(key, family)
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        self.of(key).sign_evm_hash(key, hash)
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        self.of(key).sign_solana(key, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::MnemonicSigner;

    const MAIN: &str = "test test test test test test test test test test test junk";
    const ISSUER: &str = "legal winner thank year wave sausage worth useful legal winner thank yellow";

    #[tokio::test]
    async fn the_issuers_key_comes_from_its_own_backend_and_no_other_does() {
        let main = Arc::new(MnemonicSigner::from_phrase(MAIN).unwrap());
        let issuer = Arc::new(MnemonicSigner::from_phrase(ISSUER).unwrap());
        let split = Split::new(main.clone(), issuer.clone());
        for key in [KeyRef::Sponsor, KeyRef::Omnibus, KeyRef::Settlement, KeyRef::Account(2)] {
            assert_eq!(split.evm_address(key).unwrap(), main.evm_address(key).unwrap(), "{key:?}");
            assert_eq!(split.solana_address(key).unwrap(), main.solana_address(key).unwrap(), "{key:?}");
        }
        assert_eq!(split.evm_address(KeyRef::Issuer).unwrap(), issuer.evm_address(KeyRef::Issuer).unwrap());
        assert_ne!(split.evm_address(KeyRef::Issuer).unwrap(), main.evm_address(KeyRef::Issuer).unwrap());
        let hash = B256::repeat_byte(3);
        let signature = split.sign_evm_hash(KeyRef::Issuer, hash).await.unwrap();
        let signer = signature.recover_address_from_prehash(&hash).unwrap();
        assert_eq!(signer, issuer.evm_address(KeyRef::Issuer).unwrap(), "signed by the issuer's backend");
        assert_eq!(split.backend().parts().len(), 2);
    }
}
