//! What every page's header shows: the environment, who is signed in and
//! where, the navigation, and the CSRF token its forms carry.

use super::web::environment_label;
use crate::api::ApiState;
use crate::people::resource::Session;

/// A link of the navigation: its path, its label, whether it is this page.
pub type Link = (&'static str, &'static str, bool);

/// The frame of a page.
#[derive(Clone)]
pub struct Frame {
    pub environment: &'static str,
    pub csrf: String,
    pub email: Option<String>,
    /// The organization and role, or `operator`.
    pub place: Option<String>,
    pub user_id: String,
    pub nav: Vec<Link>,
}

const TENANT: [(&str, &str); 9] = [
    ("/console/keys", "API keys"),
    ("/console/webhooks", "Webhooks"),
    ("/console/deposits", "Deposits"),
    ("/console/transfers", "Transfers"),
    ("/console/accounts", "Accounts"),
    ("/console/identities", "Identities"),
    ("/console/conversions", "Conversions"),
    ("/console/team", "Team"),
    ("/console/activity", "Activity"),
];

const OPERATOR: [(&str, &str); 4] = [
    ("/console/queues", "Queues"),
    ("/console/chains", "Chains"),
    ("/console/audit", "Audit"),
    ("/console/operator/keys", "My key"),
];

impl Frame {
    /// The frame of a page shown before sign-in.
    pub fn anonymous(state: &ApiState) -> Self {
        Frame {
            environment: environment_label(state.environment()),
            csrf: String::new(),
            email: None,
            place: None,
            user_id: String::new(),
            nav: Vec::new(),
        }
    }

    /// The frame of `session`'s page at `active`.
    pub fn of(state: &ApiState, session: &Session, active: &str) -> Self {
        let user = &session.user;
        let place = match (user.organization(), user.role()) {
            (Some(organization), Some(role)) => format!("{organization} ({})", role.as_str()),
            _ => "operator".to_string(),
        };
        let links: &[(&str, &str)] = if user.organization().is_some() { &TENANT } else { &OPERATOR };
        Frame {
            environment: environment_label(state.environment()),
            csrf: session.csrf.clone(),
            email: Some(user.email.clone()),
            place: Some(place),
            user_id: user.id.clone(),
            nav: links.iter().map(|(path, label)| (*path, *label, *path == active)).collect(),
        }
    }
}

/// A time as pages show it: UTC, to the second.
pub fn when(time: &chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}
