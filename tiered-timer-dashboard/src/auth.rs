//! Who may act: the token (a bearer header, or the session cookie its
//! login sets) or the application's check, this dashboard's CSRF token,
//! and same-origin checks. See the crate docs' "Who may act".

use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;

use crate::app::Access;
use crate::respond::{field, fields, page, redirect, Can, Shared, Visit};
use crate::views;

/// The session cookie's name.
const SESSION: &str = "ttr_session";

/// 128 bits from the operating system's random source, as hex.
pub(crate) fn random_token() -> String {
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
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Why a request that wants to act is refused, and its status.
pub(crate) type Refusal = (StatusCode, &'static str);

impl Access {
    /// What this request may do.
    pub(crate) fn can(&self, request: &Parts) -> Can {
        let allowed = match self {
            Access::ReadOnly { .. } => return Can::Look,
            Access::Token { token, session } => signed_in(&request.headers, token, session),
            Access::Check { check, .. } => check(request),
        };
        if allowed {
            Can::Act
        } else {
            Can::LogInToAct
        }
    }

    /// Checks a request that wants to act: same origin, the CSRF token,
    /// then the right to act.
    pub(crate) fn authorize(
        &self,
        request: &Parts,
        csrf: &str,
        form_csrf: Option<&str>,
    ) -> Result<(), Refusal> {
        same_origin(&request.headers)?;
        let given = form_csrf.or_else(|| {
            request
                .headers
                .get("x-csrf-token")
                .and_then(|v| v.to_str().ok())
        });
        if !given.is_some_and(|c| same(c, csrf)) {
            return Err((
                StatusCode::FORBIDDEN,
                "missing or wrong CSRF token: reload the page and try again",
            ));
        }
        match (self, self.can(request)) {
            (_, Can::Act) => Ok(()),
            (Access::ReadOnly { .. }, _) => Err((
                StatusCode::FORBIDDEN,
                "this dashboard is read-only: it allows no actions",
            )),
            (Access::Token { .. }, _) => {
                Err((StatusCode::UNAUTHORIZED, "log in with the token first"))
            }
            (Access::Check { .. }, _) => Err((
                StatusCode::FORBIDDEN,
                "the application does not allow this request to act",
            )),
        }
    }
}

/// Whether the request gives the token as a bearer header, or holds the
/// session cookie.
fn signed_in(headers: &HeaderMap, token: &str, session: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same(given.trim(), token));
    bearer || cookie(headers, SESSION).is_some_and(|c| same(&c, session))
}

/// Refuses cross-site requests: an `Origin` must name this `Host` (or the
/// proxy's `X-Forwarded-Host`), and a `Sec-Fetch-Site` must be
/// `same-origin` (or `none`, typed by the user).
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return Err((StatusCode::FORBIDDEN, "cross-site request refused"));
        }
    }
    if let Some(origin) = text("origin") {
        let host = text("x-forwarded-host").or(text("host")).unwrap_or("");
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if origin_host.is_empty() || origin_host != host {
            return Err((StatusCode::FORBIDDEN, "cross-origin request refused"));
        }
    }
    Ok(())
}

pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// `GET /login`: the token's form.
pub(crate) async fn login_page(State(app): State<Shared>, visit: Visit) -> Response {
    page(
        StatusCode::OK,
        &visit.nonce,
        views::forms::login(&app, &visit, None),
    )
}

/// `POST /login`: the token for a session cookie (HttpOnly,
/// SameSite=Strict, scoped to where the dashboard is mounted).
pub(crate) async fn login(
    State(app): State<Shared>,
    visit: Visit,
    request: Parts,
    body: Bytes,
) -> Response {
    if let Err((status, why)) = same_origin(&request.headers) {
        return crate::respond::refuse(&app, &visit, status, why);
    }
    let form = fields(&body);
    let csrf_ok = field(&form, "csrf").is_some_and(|c| same(c, &app.csrf));
    let session = match (&app.access, field(&form, "token")) {
        (Access::Token { token, session }, Some(given)) if csrf_ok && same(given, token) => session,
        (access, _) => {
            let why = match access {
                Access::Token { .. } => "wrong token",
                _ => "this dashboard has no token to log in with",
            };
            return page(
                StatusCode::UNAUTHORIZED,
                &visit.nonce,
                views::forms::login(&app, &visit, Some(why)),
            );
        }
    };
    let secure = request
        .headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes() == b"https");
    let cookie = format!(
        "{SESSION}={session}; HttpOnly; SameSite=Strict; Path={}{}",
        cookie_path(&visit.mount),
        if secure { "; Secure" } else { "" }
    );
    with_cookie(redirect(StatusCode::SEE_OTHER, &visit.root_url()), &cookie)
}

/// `POST /logout`: forgets the session cookie.
pub(crate) async fn logout(State(app): State<Shared>, visit: Visit, request: Parts) -> Response {
    if let Err((status, why)) = same_origin(&request.headers) {
        return crate::respond::refuse(&app, &visit, status, why);
    }
    let cookie = format!(
        "{SESSION}=; HttpOnly; SameSite=Strict; Path={}; Max-Age=0",
        cookie_path(&visit.mount)
    );
    with_cookie(redirect(StatusCode::SEE_OTHER, &visit.root_url()), &cookie)
}

/// The session cookie's path: the mount point, so that it goes to the
/// dashboard's pages only.
fn cookie_path(mount: &str) -> &str {
    if mount.is_empty() {
        "/"
    } else {
        mount
    }
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(cookie) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origins_must_match_the_host() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:7878")])).is_ok());
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878")
        ]))
        .is_ok());
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://evil.example")
        ]))
        .is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:7878"), ("origin", "null")])).is_err());
        assert!(same_origin(&headers(&[("host", "h"), ("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_origin(&headers(&[
            ("host", "h"),
            ("sec-fetch-site", "same-origin")
        ]))
        .is_ok());
    }

    #[test]
    fn cookies_and_tokens() {
        let h = headers(&[("cookie", "a=1; ttr_session=abc; b=2")]);
        assert_eq!(cookie(&h, "ttr_session").as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 32);
    }

    #[test]
    fn sessions_are_scoped_to_the_mount_point() {
        assert_eq!(cookie_path(""), "/");
        assert_eq!(cookie_path("/ops/jobs"), "/ops/jobs");
    }
}
