//! The console over real HTTP, as a browser without JavaScript speaks to
//! it: forms posted, redirects not followed, the session cookie read.

use alloy::transports::http::reqwest::{self, header};

/// One HTTP answer of the console.
pub struct Page {
    pub status: u16,
    pub location: String,
    pub cookie: Option<String>,
    pub set_cookie: String,
    /// `Strict-Transport-Security`, empty when absent.
    pub hsts: String,
    pub body: String,
}

/// A form body, as a browser sends it.
pub trait FormOf {
    fn form_of(self, fields: &[(&str, &str)]) -> Self;
}

impl FormOf for reqwest::RequestBuilder {
    fn form_of(self, fields: &[(&str, &str)]) -> Self {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        self.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body)
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

pub async fn read(answer: reqwest::Response) -> Page {
    let header_text =
        |name| answer.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let set_cookie = header_text(header::SET_COOKIE);
    let location = header_text(header::LOCATION);
    let hsts = header_text(header::STRICT_TRANSPORT_SECURITY);
    let cookie = set_cookie
        .split(';')
        .next()
        .and_then(|pair| pair.strip_prefix("console_session="))
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    let status = answer.status().as_u16();
    Page { status, location, cookie, set_cookie, hsts, body: answer.text().await.unwrap() }
}

pub async fn get(base: &str, path: &str, session: Option<&str>) -> Page {
    let mut request = client().get(format!("{base}{path}"));
    if let Some(token) = session {
        request = request.header(header::COOKIE, format!("console_session={token}"));
    }
    read(request.send().await.unwrap()).await
}

pub async fn post(base: &str, path: &str, session: Option<&str>, form: &[(&str, &str)]) -> Page {
    let mut request = client().post(format!("{base}{path}")).form_of(form);
    if let Some(token) = session {
        request = request.header(header::COOKIE, format!("console_session={token}"));
    }
    read(request.send().await.unwrap()).await
}

/// The CSRF token a page's forms carry.
pub fn csrf(body: &str) -> String {
    let (_, rest) = body.split_once("name=\"csrf\" value=\"").expect("a form with its CSRF token");
    rest.split('"').next().unwrap().to_string()
}

/// Enrols `link` with `password`.
pub async fn enrol(link: &str, password: &str) -> Page {
    let page = client().get(link).send().await.unwrap().text().await.unwrap();
    // A used or expired link shows no form: its POST is tried all the same.
    let secret = page
        .split_once("name=\"totp_secret\" value=\"")
        .map_or_else(String::new, |(_, rest)| rest.split('"').next().unwrap().to_string());
    let answer = client()
        .post(link)
        .form_of(&[("password", password), ("again", password), ("totp_secret", &secret), ("code", "")])
        .send()
        .await
        .unwrap();
    read(answer).await
}

pub async fn sign_in(base: &str, email: &str, password: &str) -> Page {
    post(base, "/console/sign-in", None, &[("email", email), ("password", password)]).await
}
