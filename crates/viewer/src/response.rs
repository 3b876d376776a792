//! Owns how the viewer answers over HTTP: body type, headers, CSP, page, redirect, download,
//! a failure's status. Must not know the routes (lib.rs); a page's markup is page.rs's, sent here.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, LOCATION, SET_COOKIE};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use maud::Markup;

use super::page;
use super::search::SearchError;
use crate::error::{Error, Words};
use audit_trail::access::{FailedRead, FailureNotSent, ReadFailure};

/// A response's body: a page at once, or an export as it is read.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// What every page allows: nothing from elsewhere, scripts and styles of this viewer only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn set<B>(response: &mut Response<B>, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// A complete body of `content_type`, with the headers every answer carries: no caching, no
/// sniffing, no referrer beyond the viewer, and nothing loaded from elsewhere.
pub fn text(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    set(&mut response, CONTENT_TYPE, content_type);
    set(&mut response, CACHE_CONTROL, "no-store");
    set(
        &mut response,
        HeaderName::from_static("x-content-type-options"),
        "nosniff",
    );
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a form's
    // POST, which the redrive's origin check must refuse. No URL of the viewer leaves it either way.
    set(&mut response, http::header::REFERRER_POLICY, "same-origin");
    set(
        &mut response,
        http::header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY,
    );
    response
}

/// A page or a fragment of one, as HTML.
pub fn page(status: StatusCode, body: Markup) -> Response<Body> {
    text(status, "text/html; charset=utf-8", body.into_string())
}

/// A whole page titled `title` that says why a request failed, with a retry at `retry`.
pub fn problem_page(
    status: StatusCode,
    title: &str,
    message: &str,
    retry: Option<&str>,
) -> Response<Body> {
    page(
        status,
        page::layout(title, page::problem(status.as_u16(), message, retry)),
    )
}

/// The first load's answer: set the session's cookie and go to `location` (303).
pub fn enter(set_cookie: &str, location: &str) -> Response<Body> {
    let mut response = text(StatusCode::SEE_OTHER, "text/plain", "opening");
    set(&mut response, LOCATION, location);
    set(&mut response, SET_COOKIE, set_cookie);
    response
}

/// A download of `body` (read as it is sent), saved as `filename`.
pub fn download(body: Body, content_type: &str, filename: &str) -> Response<Body> {
    let mut response = Response::new(body);
    set(&mut response, CONTENT_TYPE, content_type);
    set(&mut response, CACHE_CONTROL, "no-store");
    set(
        &mut response,
        CONTENT_DISPOSITION,
        &format!("attachment; filename=\"{filename}\""),
    );
    response
}

/// What a request failed on, with its status.
pub struct Failed {
    pub status: StatusCode,
    why: Why,
    /// Worth trying again (an AWS call failed), not bad input.
    pub retry: bool,
    /// The read failed after its access event was sent, and its failure event could not be.
    unrecorded: Option<FailureNotSent>,
}

/// A failure said here (bad input, a missing setting), or an error worded by the command line.
enum Why {
    Said(String),
    Error(Box<Error>),
}

/// What a request's failure event says of it (`Recorder::read`): a request refused as bad input
/// (`bad_request`, `bad_input` for a parameter) or the kind of the error met.
impl FailedRead for Failed {
    fn failure(&self) -> Option<ReadFailure> {
        Some(match &self.why {
            Why::Said(text) => ReadFailure {
                kind: if self.status == StatusCode::BAD_REQUEST {
                    "bad_request".into()
                } else {
                    "failed".into()
                },
                text: text.clone(),
            },
            Why::Error(error) => ReadFailure {
                kind: error.kind().into(),
                text: error.to_string(),
            },
        })
    }

    fn unrecorded(self, why: FailureNotSent) -> Self {
        Self {
            unrecorded: Some(why),
            ..self
        }
    }
}

impl From<SearchError> for Failed {
    fn from(error: SearchError) -> Self {
        Self::bad(error.to_string())
    }
}

impl From<Error> for Failed {
    /// A caller AWS denies is refused (403, no retry helps); any other failed call is the
    /// upstream's (502, worth a retry).
    fn from(error: Error) -> Self {
        let denied = error.denied();
        Self {
            status: if denied {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::BAD_GATEWAY
            },
            why: Why::Error(Box::new(error)),
            retry: !denied,
            unrecorded: None,
        }
    }
}

impl From<audit_trail::Error> for Failed {
    fn from(error: audit_trail::Error) -> Self {
        Error::from(error).into()
    }
}

impl From<audit_trail::access::AccessError> for Failed {
    fn from(error: audit_trail::access::AccessError) -> Self {
        Error::from(error).into()
    }
}

impl Failed {
    /// A failure in words said here, with its status.
    pub fn said(status: StatusCode, message: impl Into<String>, retry: bool) -> Self {
        Self {
            status,
            why: Why::Said(message.into()),
            retry,
            unrecorded: None,
        }
    }

    /// A 400: the request itself is wrong, in words that name the fix.
    pub fn bad(message: String) -> Self {
        Self::said(StatusCode::BAD_REQUEST, message, false)
    }

    /// What failed, in `words`, and that its failure event was not sent when it was not.
    pub fn message(self, words: Words) -> String {
        let message = match self.why {
            Why::Said(message) => message,
            Why::Error(error) => words(*error),
        };
        match self.unrecorded {
            Some(why) => format!("{message}\nnote: {why}"),
            None => message,
        }
    }

    /// As a whole page titled `title`, with a retry at `retry`.
    pub fn page(self, words: Words, title: &str, retry: Option<&str>) -> Response<Body> {
        let status = self.status;
        problem_page(status, title, &self.message(words), retry)
    }

    /// As a fragment (for the page's script).
    pub fn fragment(self, words: Words) -> Response<Body> {
        let status = self.status;
        page(
            status,
            page::problem(status.as_u16(), &self.message(words), None),
        )
    }
}
