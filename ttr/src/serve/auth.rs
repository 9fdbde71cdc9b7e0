//! Who may act on the dashboard: the token (a bearer header or the login
//! form's session cookie), this process' CSRF token, and same-origin
//! checks. Read-only without `--token`; see the module docs of `serve`.

use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::{field, fields, html, refuse, App, Shared};

/// 128 bits from the operating system's random source, as hex.
pub(super) fn random_token() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut urandom) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        if urandom.read_exact(&mut bytes).is_ok() {
            return bytes.iter().map(|b| format!("{b:02x}")).collect();
        }
    }
    // Elsewhere: std's per-process random SipHash keys.
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    for n in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Equal, in time that does not depend on where they differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl App {
    /// Whether this request may act: the token as a bearer header, or the
    /// session cookie.
    pub(super) fn signed_in(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| same(given.trim(), token));
        bearer || cookie(headers, "ttr_session").is_some_and(|c| same(&c, &self.session))
    }

    /// Checks a POST: same origin, CSRF token, then the token.
    pub(super) fn authorize(
        &self,
        headers: &HeaderMap,
        form_csrf: Option<&str>,
    ) -> Result<(), Refusal> {
        same_origin(headers)?;
        let csrf = form_csrf.map(str::to_owned).or_else(|| {
            headers
                .get("x-csrf-token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
        if !csrf.is_some_and(|c| same(&c, &self.csrf)) {
            return Err(Refusal(
                StatusCode::FORBIDDEN,
                "missing or wrong CSRF token: reload the page and try again",
            ));
        }
        if self.token.is_none() {
            return Err(Refusal(
                StatusCode::FORBIDDEN,
                "this dashboard is read-only: start `ttr serve` with --token to allow actions",
            ));
        }
        if !self.signed_in(headers) {
            return Err(Refusal(
                StatusCode::UNAUTHORIZED,
                "log in with the token first",
            ));
        }
        Ok(())
    }
}

/// Refuses cross-site requests: an `Origin` must name this `Host`, and a
/// `Sec-Fetch-Site` must be `same-origin` (or `none`, typed by the user).
pub(super) fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return Err(Refusal(StatusCode::FORBIDDEN, "cross-site request refused"));
        }
    }
    if let Some(origin) = text("origin") {
        let host = text("x-forwarded-host").or(text("host")).unwrap_or("");
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if origin_host.is_empty() || origin_host != host {
            return Err(Refusal(
                StatusCode::FORBIDDEN,
                "cross-origin request refused",
            ));
        }
    }
    Ok(())
}

/// Why a request is refused, and its status.
#[derive(Debug)]
pub(super) struct Refusal(pub(super) StatusCode, pub(super) &'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refuse(self.0, self.1)
    }
}

pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

pub(super) async fn login_page(State(app): State<Shared>) -> Response {
    let nonce = random_token();
    html(StatusCode::OK, &nonce, html::login_page(&app, &nonce, None))
}

pub(super) async fn login(State(app): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = same_origin(&headers) {
        return refused.into_response();
    }
    let form = fields(&body);
    let nonce = random_token();
    let csrf_ok = field(&form, "csrf").is_some_and(|c| same(c, &app.csrf));
    let token_ok = match (&app.token, field(&form, "token")) {
        (Some(token), Some(given)) => same(given, token),
        _ => false,
    };
    if !csrf_ok || !token_ok {
        let why = if app.token.is_none() {
            "this dashboard is read-only: there is no token to log in with"
        } else {
            "wrong token"
        };
        return html(
            StatusCode::UNAUTHORIZED,
            &nonce,
            html::login_page(&app, &nonce, Some(why)),
        );
    }
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes() == b"https");
    let cookie = format!(
        "ttr_session={}; HttpOnly; SameSite=Strict; Path=/{}",
        app.session,
        if secure { "; Secure" } else { "" }
    );
    let mut response = (StatusCode::SEE_OTHER, "").into_response();
    let h = response.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        h.insert(header::SET_COOKIE, cookie);
    }
    response
}

pub(super) async fn logout(headers: HeaderMap) -> Response {
    if let Err(refused) = same_origin(&headers) {
        return refused.into_response();
    }
    let mut response = (StatusCode::SEE_OTHER, "").into_response();
    let h = response.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    h.insert(
        header::SET_COOKIE,
        HeaderValue::from_static("ttr_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    response
}
