//! A tenant's members: a role set, a user removed; the organization keeps
//! an admin.

use super::{PeopleError, record, resource::User, rules::TenantRole};
use crate::{
    audit::{self, Actor},
    store::{Store, StoreError, Tx, console as rows, now_micros},
};

/// Sets tenant user `target`'s role, by the organization's admin `actor`
/// (or an operator admin); the last admin keeps its role.
pub async fn set_role(
    store: &Store,
    organization: &str,
    target: &str,
    role: TenantRole,
    actor: &Actor,
) -> Result<User, PeopleError> {
    let mut tx = store.begin().await?;
    let entry = record(actor, "console_user.role_set", target, Some(organization), Some(role.as_str()));
    audit::append(&mut tx, store.cipher().ok(), entry).await?;
    member_of(&mut tx, organization, target).await?;
    rows::set_role(&mut tx, target, role).await?;
    keeps_an_admin(&mut tx, organization).await?;
    let user = member_of(&mut tx, organization, target).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(user)
}

/// Removes tenant user `target`, by `actor`: its sessions end at once.
pub async fn remove(
    store: &Store,
    organization: &str,
    target: &str,
    actor: &Actor,
) -> Result<(), PeopleError> {
    let mut tx = store.begin().await?;
    audit::append(
        &mut tx,
        store.cipher().ok(),
        record(actor, "console_user.removed", target, Some(organization), None),
    )
    .await?;
    member_of(&mut tx, organization, target).await?;
    rows::remove(&mut tx, target, now_micros()).await?;
    keeps_an_admin(&mut tx, organization).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// The present user `target` of `organization`, locked; another
/// organization's user is not found.
pub(super) async fn member_of(tx: &mut Tx, organization: &str, target: &str) -> Result<User, PeopleError> {
    rows::lock_user(tx, target)
        .await?
        .filter(|user| user.organization() == Some(organization) && user.removed_at.is_none())
        .ok_or_else(|| StoreError::NotFound(format!("user {target}")).into())
}

async fn keeps_an_admin(tx: &mut Tx, organization: &str) -> Result<(), PeopleError> {
    if rows::tenant_admins(tx, organization).await? == 0 {
        return Err(PeopleError::Refused(
            "this would leave the organization without an admin: make another user admin first".into(),
        ));
    }
    Ok(())
}
