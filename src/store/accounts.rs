//! Accounts and the addresses the watchers follow.

use futures::TryStreamExt;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use std::collections::{HashMap, HashSet};

use super::{
    Store, StoreError,
    identities::lock_identity,
    now_micros,
    params::{CHUNK, placeholders},
    parse_column,
};
use crate::{
    account::{Account, AccountAddress, AccountStatus, AccountType},
    chain::Chain,
};

/// A page of an organization's accounts, by id.
#[derive(Debug, Clone, Default)]
pub struct AccountPage {
    pub organization: String,
    /// Only accounts of these identities (all when empty).
    pub identity_ids: Vec<String>,
    /// Only accounts whose id sorts after this one: the previous page's last.
    pub after: Option<String>,
    pub limit: u32,
}

/// An account to register, with addresses not yet normalised.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub id: String,
    pub organization: String,
    /// An identity of the same organization that may open accounts (not
    /// `REJECTED` or `TERMINATED`); the account's status is derived from it.
    pub identity_id: String,
    /// The client's idempotency key, for accounts created through the API.
    pub request_id: Option<String>,
    pub kind: AccountType,
    pub addresses: Vec<AccountAddress>,
    /// Where the watch of its addresses begins.
    pub watch_from: WatchFrom,
}

/// Where the watch of a new account's addresses begins: every deposit to
/// them from there on is found, whenever the watchers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WatchFrom {
    /// At its registration (now): resolved to a block by block time.
    #[default]
    Registration,
    /// At a point in time (microseconds since the epoch): resolved likewise.
    Time(i64),
    /// At a block (Solana: slot) of its chain.
    Block(u64),
}

/// Inserts `accounts` and their addresses in `tx`. Each address must be
/// valid for the family of every chain it is listed on, and an address is
/// watched for one account per chain.
pub(crate) async fn insert_accounts(
    tx: &mut Transaction<'static, Any>,
    accounts: &[NewAccount],
) -> Result<(), StoreError> {
    let created_at = now_micros();
    // Taking the version first serialises concurrent writers on its row, so
    // versions grow in commit order and watchers can load increments.
    let version: i64 =
        sqlx::query("UPDATE store_meta SET value = value + 1 WHERE key = 'accounts_version' RETURNING value")
            .fetch_one(&mut **tx)
            .await?
            .try_get("value")?;
    let mut addresses = Vec::new();
    for new in accounts {
        for (chain, address) in validate(new)? {
            addresses.push(NewAddress { chain, address, account: new, version, created_at });
        }
    }
    check_organizations(tx, accounts).await?;
    let statuses = identity_statuses(tx, accounts).await?;
    for (chunk, statuses) in accounts.chunks(ROWS).zip(statuses.chunks(ROWS)) {
        insert_account_rows(tx, chunk, statuses, created_at).await?;
    }
    for chunk in addresses.chunks(ROWS) {
        insert_address_rows(tx, chunk).await?;
    }
    Ok(())
}

/// Rows per insert statement of at most 7 columns, within the parameters per
/// statement that keep SQLite's lookup of bind parameters by name cheap.
const ROWS: usize = CHUNK / 7;

/// An address row to insert, with where its watch begins.
struct NewAddress<'a> {
    chain: Chain,
    address: String,
    account: &'a NewAccount,
    version: i64,
    created_at: i64,
}

pub(super) async fn check_organizations(
    tx: &mut Transaction<'static, Any>,
    accounts: &[NewAccount],
) -> Result<(), StoreError> {
    let mut organizations: Vec<&str> = accounts.iter().map(|a| a.organization.as_str()).collect();
    organizations.sort_unstable();
    organizations.dedup();
    for organization in organizations {
        let found = sqlx::query("SELECT id FROM organizations WHERE id = $1")
            .bind(organization)
            .fetch_optional(&mut **tx)
            .await?;
        if found.is_none() {
            return Err(StoreError::NotFound(format!("organization {organization}")));
        }
    }
    Ok(())
}

/// Each account's status, derived from its identity, whose row stays
/// locked until commit: an identity's change and an account opened for it
/// are judged one at a time, so no account misses its identity's status.
/// An identity not of the account's organization is not found; a `REJECTED`
/// or `TERMINATED` one opens no accounts.
pub(super) async fn identity_statuses(
    tx: &mut Transaction<'static, Any>,
    accounts: &[NewAccount],
) -> Result<Vec<AccountStatus>, StoreError> {
    let mut known: HashMap<(&str, &str), AccountStatus> = HashMap::new();
    let mut statuses = Vec::with_capacity(accounts.len());
    for new in accounts {
        let key = (new.organization.as_str(), new.identity_id.as_str());
        if let Some(status) = known.get(&key) {
            statuses.push(*status);
            continue;
        }
        let (_, state) = lock_identity(tx, &new.organization, &new.identity_id).await?;
        if !state.may_open_accounts() {
            return Err(StoreError::Invalid(format!(
                "identity {} is {}: it cannot open accounts",
                new.identity_id,
                state.status()
            )));
        }
        known.insert(key, state.account_status());
        statuses.push(state.account_status());
    }
    Ok(statuses)
}

/// Inserts accounts in one statement; an id that exists already, or twice in
/// the batch, is a conflict naming it.
async fn insert_account_rows(
    tx: &mut Transaction<'static, Any>,
    chunk: &[NewAccount],
    statuses: &[AccountStatus],
    created_at: i64,
) -> Result<(), StoreError> {
    let values: Vec<String> = (0..chunk.len()).map(|i| format!("({})", placeholders(i * 7 + 1, 7))).collect();
    let sql = format!(
        "INSERT INTO accounts (id, organization_id, identity_id, type, status, created_at, request_id) VALUES {}
         ON CONFLICT (id) DO NOTHING RETURNING id",
        values.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for (new, status) in chunk.iter().zip(statuses) {
        query = query
            .bind(&new.id)
            .bind(&new.organization)
            .bind(&new.identity_id)
            .bind(new.kind.as_str())
            .bind(status.as_str())
            .bind(created_at)
            .bind(new.request_id.as_deref());
    }
    let inserted: HashSet<String> =
        query.fetch_all(&mut **tx).await?.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?;
    let mut seen = HashSet::new();
    match chunk.iter().find(|new| !inserted.contains(&new.id) || !seen.insert(new.id.as_str())) {
        Some(new) => Err(StoreError::taken(
            format!("account:{}", new.id),
            format!("account {} already exists", new.id),
        )),
        None => Ok(()),
    }
}

/// Inserts address rows in one statement; an address already watched on its
/// chain, or twice in the batch, is a conflict naming it.
async fn insert_address_rows(
    tx: &mut Transaction<'static, Any>,
    chunk: &[NewAddress<'_>],
) -> Result<(), StoreError> {
    let values: Vec<String> = (0..chunk.len()).map(|i| format!("({})", placeholders(i * 7 + 1, 7))).collect();
    let sql = format!(
        "INSERT INTO account_addresses (chain, address, account_id, version, registered_at, watch_from, gap_next)
         VALUES {} ON CONFLICT (chain, address) DO NOTHING RETURNING chain, address",
        values.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for row in chunk {
        let (registered_at, watch_from) = match row.account.watch_from {
            WatchFrom::Registration => (row.created_at, None),
            WatchFrom::Time(at) => (at, None),
            WatchFrom::Block(block) => (row.created_at, Some(super::to_i64(block)?)),
        };
        query = query
            .bind(row.chain.as_str())
            .bind(&row.address)
            .bind(&row.account.id)
            .bind(row.version)
            .bind(registered_at)
            .bind(watch_from)
            .bind(watch_from);
    }
    let inserted: HashSet<(String, String)> = query
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|r| Ok((r.try_get("chain")?, r.try_get("address")?)))
        .collect::<Result<_, StoreError>>()?;
    let mut seen = HashSet::new();
    let clash = chunk.iter().find(|row| {
        let key = (row.chain.as_str().to_string(), row.address.clone());
        !inserted.contains(&key) || !seen.insert(key)
    });
    match clash {
        Some(row) => Err(StoreError::taken(
            format!("address:{}:{}", row.chain, row.address),
            format!("address {} is already watched on {}", row.address, row.chain),
        )),
        None => Ok(()),
    }
}

impl Store {
    pub async fn account(&self, id: &str) -> Result<Account, StoreError> {
        let mut accounts = self.load_accounts(Some(id), None).await?;
        accounts.pop().ok_or_else(|| StoreError::NotFound(format!("account {id}")))
    }

    /// Accounts ordered by id, optionally of one organization.
    pub async fn accounts(&self, organization: Option<&str>) -> Result<Vec<Account>, StoreError> {
        self.load_accounts(None, organization).await
    }

    async fn load_accounts(
        &self,
        id: Option<&str>,
        organization: Option<&str>,
    ) -> Result<Vec<Account>, StoreError> {
        let rows = sqlx::query(&format!(
            "{ACCOUNT_SELECT} FROM accounts a {IDENTITY_JOIN} LEFT JOIN account_addresses d ON d.account_id = a.id
             WHERE ($1 IS NULL OR a.id = $1) AND ($2 IS NULL OR a.organization_id = $2)
             ORDER BY a.id, d.address, d.chain"
        ))
        .bind(id)
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        accounts_from_rows(rows)
    }

    /// The account created with `request_id` in `organization`, if any.
    pub async fn account_by_request(
        &self,
        organization: &str,
        request_id: &str,
    ) -> Result<Option<Account>, StoreError> {
        let row = sqlx::query("SELECT id FROM accounts WHERE organization_id = $1 AND request_id = $2")
            .bind(organization)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => Ok(Some(self.account(&row.try_get::<String, _>("id")?).await?)),
            None => Ok(None),
        }
    }

    /// An account, if it belongs to `organization`.
    pub async fn organization_account(&self, organization: &str, id: &str) -> Result<Account, StoreError> {
        let mut accounts = self.load_accounts(Some(id), Some(organization)).await?;
        accounts.pop().ok_or_else(|| StoreError::NotFound(format!("account {id}")))
    }

    /// A page of an organization's accounts ordered by id; see [`AccountPage`].
    pub async fn account_page(&self, page: &AccountPage) -> Result<Vec<Account>, StoreError> {
        let identities = (0..page.identity_ids.len()).map(|i| format!("${}", i + 4)).collect::<Vec<_>>();
        let identity_filter = if identities.is_empty() {
            String::new()
        } else {
            format!("AND identity_id IN ({})", identities.join(", "))
        };
        let sql = format!(
            "{ACCOUNT_SELECT} FROM (
                 SELECT id, request_id, organization_id, identity_id, type, status FROM accounts
                 WHERE organization_id = $1 AND ($2 IS NULL OR id > $2) {identity_filter}
                 ORDER BY id LIMIT $3
             ) a {IDENTITY_JOIN} LEFT JOIN account_addresses d ON d.account_id = a.id
             ORDER BY a.id, d.address, d.chain"
        );
        let mut query = sqlx::query(&sql)
            .bind(&page.organization)
            .bind(page.after.as_deref())
            .bind(i64::from(page.limit));
        for identity in &page.identity_ids {
            query = query.bind(identity);
        }
        accounts_from_rows(query.fetch_all(&self.pool).await?)
    }

    /// Every watched address on a chain with its account: `(address, account_id)`.
    pub async fn watched_addresses(&self, chain: Chain) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        self.watched_addresses_between(chain, 0, i64::MAX, |address, account| out.push((address, account)))
            .await?;
        Ok(out)
    }

    /// Streams the addresses added with versions in `(after, up_to]` to `each`,
    /// without holding them all in memory: a million addresses load in a
    /// watcher's set, not in a copy beside it.
    pub async fn watched_addresses_between(
        &self,
        chain: Chain,
        after: i64,
        up_to: i64,
        mut each: impl FnMut(String, String),
    ) -> Result<u64, StoreError> {
        let mut rows = sqlx::query(
            "SELECT address, account_id FROM account_addresses WHERE chain = $1 AND version > $2 AND version <= $3",
        )
        .bind(chain.as_str())
        .bind(after)
        .bind(up_to)
        .fetch(&self.pool);
        let mut count = 0;
        while let Some(row) = rows.try_next().await? {
            each(row.try_get("address")?, row.try_get("account_id")?);
            count += 1;
        }
        Ok(count)
    }

    /// Grows with every change to accounts or addresses, so watchers reload
    /// their address sets only when something changed.
    pub async fn accounts_version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT value FROM store_meta WHERE key = 'accounts_version'")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("value")?)
    }
}

/// Accounts with their identity's mirrors (`i`) and addresses (`d`).
const ACCOUNT_SELECT: &str = "SELECT a.id, a.request_id, a.organization_id, a.identity_id, a.type, a.status, \
     i.type AS identity_type, i.status AS identity_status, i.sub_status AS identity_sub_status, d.chain, d.address";

/// Joins each account (`a`) to its identity (`i`).
const IDENTITY_JOIN: &str =
    "JOIN identities i ON i.organization_id = a.organization_id AND i.id = a.identity_id";

/// Accounts from rows of [`ACCOUNT_SELECT`] ordered by account id: one row per
/// address and chain, or one without an address.
fn accounts_from_rows(rows: Vec<AnyRow>) -> Result<Vec<Account>, StoreError> {
    let mut accounts: Vec<Account> = Vec::new();
    for row in rows {
        let id: String = row.try_get("id")?;
        if accounts.last().is_none_or(|a| a.id != id) {
            let identity_sub_status = row
                .try_get::<Option<String>, _>("identity_sub_status")?
                .map(|s| parse_column(&s, "identities.sub_status"))
                .transpose()?;
            accounts.push(Account {
                id,
                request_id: row.try_get("request_id")?,
                organization: row.try_get("organization_id")?,
                identity_id: row.try_get("identity_id")?,
                identity_type: parse_column(&row.try_get::<String, _>("identity_type")?, "identities.type")?,
                kind: parse_column(&row.try_get::<String, _>("type")?, "accounts.type")?,
                addresses: Vec::new(),
                status: parse_column(&row.try_get::<String, _>("status")?, "accounts.status")?,
                identity_status: parse_column(
                    &row.try_get::<String, _>("identity_status")?,
                    "identities.status",
                )?,
                identity_sub_status,
            });
        }
        let account = accounts.last_mut().expect("pushed above");
        let (Some(chain), Some(address)) =
            (row.try_get::<Option<String>, _>("chain")?, row.try_get::<Option<String>, _>("address")?)
        else {
            continue;
        };
        let chain: Chain = parse_column(&chain, "account_addresses.chain")?;
        match account.addresses.iter_mut().find(|a| a.address == address) {
            Some(entry) => entry.chains.push(chain),
            None => account.addresses.push(AccountAddress { chains: vec![chain], address }),
        }
    }
    Ok(accounts)
}

/// The account's `(chain, canonical address)` pairs, or why it is refused.
fn validate(new: &NewAccount) -> Result<Vec<(Chain, String)>, StoreError> {
    if new.id.trim().is_empty() || new.identity_id.trim().is_empty() {
        return Err(StoreError::Invalid("account id and identity id must not be empty".into()));
    }
    if new.addresses.is_empty() || new.addresses.iter().any(|a| a.chains.is_empty()) {
        return Err(StoreError::Invalid(
            "an account needs at least one address with at least one chain".into(),
        ));
    }
    let mut addresses = Vec::new();
    for entry in &new.addresses {
        for chain in &entry.chains {
            let canonical = crate::family::rules::normalize(chain.family(), &entry.address)
                .map_err(|e| StoreError::Invalid(format!("{e} on {chain}")))?;
            addresses.push((*chain, canonical));
        }
    }
    Ok(addresses)
}
