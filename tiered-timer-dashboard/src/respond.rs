//! What every request carries ([`Visit`]: where the dashboard is mounted,
//! what this visitor may do, the page's script nonce) and how every page
//! goes out ([`page`]: the security headers).

use std::sync::Arc;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::Markup;

use crate::app::App;
use crate::auth::random_token;
use crate::views;

pub(crate) type Shared = Arc<App>;

/// What a visitor may do on this page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Can {
    /// Nothing: the dashboard is read-only, actions are not offered.
    Look,
    /// Act after logging in: actions show disabled, with the hint.
    LogInToAct,
    /// Act.
    Act,
}

/// One request as the pages see it.
#[derive(Debug, Clone)]
pub(crate) struct Visit {
    /// The path the dashboard is mounted at, without a trailing `/` (empty
    /// at the root): every link starts with it.
    pub(crate) mount: String,
    pub(crate) can: Can,
    /// This response's script and style nonce.
    pub(crate) nonce: String,
}

impl FromRequestParts<Shared> for Visit {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Visit, Self::Rejection> {
        // Pages reached without the router being made in a runtime start
        // the sampling here.
        App::start_sampling(app);
        Ok(Visit {
            mount: mount_of(parts),
            can: app.access.can(parts),
            nonce: random_token(),
        })
    }
}

/// The path the dashboard is mounted at: the request's path as the
/// application received it, less the path left for the dashboard's router.
fn mount_of(parts: &Parts) -> String {
    let inner = parts.uri.path();
    let outer = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(inner, |o| o.0.path());
    mount_point(outer, inner)
}

pub(crate) fn mount_point(outer: &str, inner: &str) -> String {
    match outer.strip_suffix(inner) {
        Some(prefix) => prefix.trim_end_matches('/').to_owned(),
        // `nest("/ops", ..)` hands `/ops` itself to the inner router as `/`.
        None if inner == "/" => outer.trim_end_matches('/').to_owned(),
        None => String::new(),
    }
}

/// An HTML page with the security headers: a Content-Security-Policy that
/// runs only this response's own script (by nonce), no framing, no
/// sniffing, no caching.
pub(crate) fn page(status: StatusCode, nonce: &str, body: Markup) -> Response {
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src data:; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    let mut response = (status, body.into_string()).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A refusal (bad request, not allowed, not found) as a page.
pub(crate) fn refuse(app: &App, visit: &Visit, status: StatusCode, why: &str) -> Response {
    page(
        status,
        &visit.nonce,
        views::message(app, visit, "Refused", why),
    )
}

/// The store's failure as a page (502: the dashboard is a gateway to it).
pub(crate) fn failed(app: &App, visit: &Visit, why: &str) -> Response {
    page(
        StatusCode::BAD_GATEWAY,
        &visit.nonce,
        views::message(app, visit, "Store trouble", why),
    )
}

/// A redirect to a path of the dashboard (`303 See Other` after a form,
/// `308` for a moved page).
pub(crate) fn redirect(status: StatusCode, to: &str) -> Response {
    let mut response = (status, "").into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Form or query fields, in order (a field may repeat).
pub(crate) fn fields(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

/// The first value of field `name`.
pub(crate) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_point_is_what_the_router_was_nested_under() {
        assert_eq!(mount_point("/", "/"), "");
        assert_eq!(mount_point("/queues/a", "/queues/a"), "");
        assert_eq!(mount_point("/ops/jobs/queues/a", "/queues/a"), "/ops/jobs");
        assert_eq!(mount_point("/ops/jobs", "/"), "/ops/jobs");
        assert_eq!(mount_point("/ops/jobs/", "/"), "/ops/jobs");
        assert_eq!(mount_point("/elsewhere", "/queues/a"), "");
    }
}
