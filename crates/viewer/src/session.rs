//! Owns who may use a running viewer: the one-time token, the cookie that replaces it, the Host
//! a request names (loopback only). Must not know the pages or the routes.

use std::net::SocketAddr;
use std::sync::Mutex;

use http::header::{COOKIE, HOST};
use http::{HeaderMap, StatusCode};

/// The query parameter of the printed URL.
pub const TOKEN: &str = "token";

/// Bytes of randomness in the token and the cookie (hex: twice as many characters).
const SECRET_BYTES: usize = 32;

/// Tokens replaced by a fresh link and remembered, so that their links say "expired".
const RETIRED: usize = 16;

/// The link's one-time token: the newest printed, whether it was used, and those it replaced.
struct Tokens {
    current: String,
    used: bool,
    retired: Vec<String>,
}

/// The secrets of one run.
pub struct Session {
    tokens: Mutex<Tokens>,
    cookie: String,
    /// The first segment of every path: a server at another port of 127.0.0.1, which the
    /// browser sends the cookie to (cookies ignore ports), never learns it (docs/ui.md).
    secret: String,
    cookie_name: String,
    hosts: [String; 2],
}

/// What a request may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// The token, used for the first time: set the cookie and send the browser to `location`,
    /// the same URL without the token.
    Enter {
        set_cookie: String,
        location: String,
    },
    /// The run's secret and the cookie: go on to `path`, the path after the secret.
    Allowed { path: String },
    /// Refused, with the status and why in words.
    Refused(StatusCode, &'static str),
}

/// Why no secret could be made.
#[derive(Debug, thiserror::Error)]
#[error("no random bytes for the viewer's token from the system")]
pub struct NoRandom;

impl Session {
    /// Fresh secrets for a server at `address` (its port names the cookie: two viewers on one
    /// machine keep theirs apart).
    pub fn new(address: SocketAddr) -> Result<Self, NoRandom> {
        let port = address.port();
        Ok(Self {
            tokens: Mutex::new(Tokens {
                current: secret()?,
                used: false,
                retired: Vec::new(),
            }),
            cookie: secret()?,
            secret: secret()?,
            cookie_name: format!("auditctl_ui_{port}"),
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        })
    }

    /// The URL to open: the run's secret, then the token; the first load sets the cookie.
    pub fn url(&self) -> String {
        let token = self.tokens().current.clone();
        self.url_with(&token)
    }

    /// A fresh link, asked for by the person at the terminal (`auditctl ui` reads a line on
    /// stdin): a new one-time token in place of the last, which stops working whether it was
    /// used or not; browsers that entered keep their session (docs/ui.md "Who can open it").
    pub fn fresh_url(&self) -> Result<String, NoRandom> {
        let token = secret()?;
        {
            let mut tokens = self.tokens();
            let old = std::mem::replace(&mut tokens.current, token.clone());
            if tokens.retired.len() >= RETIRED {
                tokens.retired.remove(0);
            }
            tokens.retired.push(old);
            tokens.used = false;
        }
        Ok(self.url_with(&token))
    }

    fn url_with(&self, token: &str) -> String {
        format!("http://{}/{}/?{TOKEN}={token}", self.hosts[0], self.secret)
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The path after the run's secret (`/<secret>/rest` gives `/rest`); `None` when `path`
    /// does not begin with it.
    fn within<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix('/')?;
        let at = rest.find('/')?;
        let (first, inner) = rest.split_at(at);
        aws_lc_rs::constant_time::verify_slices_are_equal(first.as_bytes(), self.secret.as_bytes())
            .ok()
            .map(|()| inner)
    }

    /// Whether a request to `path` with `query` and `headers` may go on: at this viewer's host,
    /// under the run's secret, with the token (once) or the cookie.
    pub fn admit(&self, path: &str, query: &str, headers: &HeaderMap) -> Admission {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ours| ours.eq_ignore_ascii_case(h))) {
            return Admission::Refused(
                StatusCode::FORBIDDEN,
                "this viewer answers only requests to 127.0.0.1 or localhost at its own port",
            );
        }
        let Some(path) = self.within(path) else {
            return Admission::Refused(
                StatusCode::NOT_FOUND,
                "this address lacks the run's secret: open the URL that auditctl ui printed (every address of the viewer begins with its secret, not the cookie alone)",
            );
        };
        let mut token = None;
        let mut rest = form_urlencoded::Serializer::new(String::new());
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if name == TOKEN {
                token = Some(value.into_owned());
            } else {
                rest.append_pair(&name, &value);
            }
        }
        if let Some(token) = token {
            let same = |ours: &str| {
                aws_lc_rs::constant_time::verify_slices_are_equal(token.as_bytes(), ours.as_bytes())
                    .is_ok()
            };
            let mut tokens = self.tokens();
            let expired = if same(&tokens.current) {
                std::mem::replace(&mut tokens.used, true)
            } else if tokens.retired.iter().any(|old| same(old)) {
                true
            } else {
                return Admission::Refused(
                    StatusCode::FORBIDDEN,
                    "this link's token is not this viewer's: open the URL that auditctl ui printed",
                );
            };
            drop(tokens);
            if expired {
                return Admission::Refused(
                    StatusCode::FORBIDDEN,
                    "this link's token has expired: it works once, and the browser that opened it holds the session now; press Enter in the terminal where auditctl ui runs for a new link",
                );
            }
            let rest = rest.finish();
            let location = if rest.is_empty() {
                format!("/{}{path}", self.secret)
            } else {
                format!("/{}{path}?{rest}", self.secret)
            };
            return Admission::Enter {
                set_cookie: format!(
                    "{}={}; HttpOnly; SameSite=Strict; Path=/{}/",
                    self.cookie_name, self.cookie, self.secret
                ),
                location,
            };
        }
        let held = headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| {
                name == self.cookie_name
                    && aws_lc_rs::constant_time::verify_slices_are_equal(
                        value.as_bytes(),
                        self.cookie.as_bytes(),
                    )
                    .is_ok()
            });
        if held {
            Admission::Allowed {
                path: path.to_owned(),
            }
        } else {
            Admission::Refused(
                StatusCode::UNAUTHORIZED,
                "no session: open the URL that auditctl ui printed (it carries a one-time token)",
            )
        }
    }
}

impl Session {
    /// Whether a request that costs or changes something (a POST) comes from this viewer's own
    /// pages: its `Origin` is this viewer's (a browser sends it with every POST); missing or
    /// another's, refused. With the cookie's SameSite=Strict, a page of another site cannot make
    /// the browser redrive.
    pub fn same_origin(&self, headers: &HeaderMap) -> bool {
        headers
            .get(http::header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| self.hosts.iter().any(|ours| ours.eq_ignore_ascii_case(o)))
    }
}

/// A secret from the system's random generator (aws-lc-rs), as hex.
fn secret() -> Result<String, NoRandom> {
    let mut bytes = [0u8; SECRET_BYTES];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| NoRandom)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn session() -> Session {
        Session::new("127.0.0.1:4321".parse().unwrap()).unwrap()
    }

    fn headers(host: &str, cookie: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(host).unwrap());
        if let Some(cookie) = cookie {
            headers.insert(COOKIE, HeaderValue::from_str(cookie).unwrap());
        }
        headers
    }

    /// `rest` under the run's secret.
    fn at(s: &Session, rest: &str) -> String {
        format!("/{}{rest}", s.secret)
    }

    #[test]
    fn the_token_works_once_and_leaves_a_cookie_and_a_url_without_it() {
        let s = session();
        let url = s.url();
        let query = url.split_once('?').unwrap().1;
        assert!(
            url.starts_with(&format!("http://127.0.0.1:4321/{}/?token=", s.secret)),
            "{url}"
        );
        assert_eq!(s.secret.len(), 2 * SECRET_BYTES);
        assert_eq!(query.len(), "token=".len() + 2 * SECRET_BYTES);
        let Admission::Enter {
            set_cookie,
            location,
        } = s.admit(
            &at(&s, "/"),
            &format!("actor=a&{query}"),
            &headers("127.0.0.1:4321", None),
        )
        else {
            panic!("the token lets in");
        };
        assert_eq!(location, at(&s, "/?actor=a"));
        assert!(set_cookie.starts_with("auditctl_ui_4321="), "{set_cookie}");
        assert!(
            set_cookie.ends_with(&format!("; HttpOnly; SameSite=Strict; Path=/{}/", s.secret)),
            "the browser sends it under the secret only: {set_cookie}"
        );
        let cookie = set_cookie.split(';').next().unwrap();
        assert_eq!(
            s.admit(
                &at(&s, "/event"),
                "",
                &headers("localhost:4321", Some(&format!("x=1; {cookie}")))
            ),
            Admission::Allowed {
                path: "/event".into()
            }
        );
        // The same link again: expired.
        let again = s.admit(&at(&s, "/"), query, &headers("127.0.0.1:4321", None));
        assert!(
            matches!(again, Admission::Refused(StatusCode::FORBIDDEN, why) if why.contains("expired")),
            "{again:?}"
        );
    }

    #[test]
    fn a_fresh_link_opens_once_more_and_every_link_before_it_is_expired() {
        let s = session();
        let first = s.url().split_once('?').unwrap().1.to_owned();
        let enter = |query: &str| s.admit(&at(&s, "/"), query, &headers("127.0.0.1:4321", None));
        let Admission::Enter { set_cookie, .. } = enter(&first) else {
            panic!("the first link lets in");
        };
        let unused = s.fresh_url().unwrap();
        let fresh = s.fresh_url().unwrap();
        assert_ne!(unused, fresh);
        assert_eq!(s.url(), fresh, "the newest link is the URL");
        let unused = unused.split_once('?').unwrap().1.to_owned();
        let fresh = fresh.split_once('?').unwrap().1.to_owned();
        // The fresh link: one more browser in, with the run's session.
        let Admission::Enter {
            set_cookie: second, ..
        } = enter(&fresh)
        else {
            panic!("the fresh link lets in");
        };
        assert_eq!(second, set_cookie);
        // Every link once used or replaced says so, and how to get a new one.
        for query in [&first, &unused, &fresh] {
            assert!(
                matches!(
                    enter(query),
                    Admission::Refused(StatusCode::FORBIDDEN, why)
                        if why.contains("expired") && why.contains("press Enter")
                ),
                "{query}"
            );
        }
    }

    #[test]
    fn the_cookie_without_the_runs_secret_in_the_path_is_refused() {
        let s = session();
        let query = s.url().split_once('?').unwrap().1.to_owned();
        let Admission::Enter { set_cookie, .. } =
            s.admit(&at(&s, "/"), &query, &headers("127.0.0.1:4321", None))
        else {
            panic!("the token lets in");
        };
        let cookie = set_cookie.split(';').next().unwrap();
        let held = headers("127.0.0.1:4321", Some(cookie));
        let wrong = format!("/{}/", "0".repeat(2 * SECRET_BYTES));
        let prefix = &s.secret[..10];
        for path in [
            "/",
            "/event",
            "/health",
            wrong.as_str(),
            &format!("/{}", s.secret),
            &format!("/{prefix}/"),
            &format!("/x{}/", s.secret),
        ] {
            assert!(
                matches!(
                    s.admit(path, "", &held),
                    Admission::Refused(StatusCode::NOT_FOUND, why) if why.contains("secret")
                ),
                "{path}"
            );
        }
        assert_eq!(
            s.admit(&at(&s, "/"), "", &held),
            Admission::Allowed { path: "/".into() }
        );
    }

    #[test]
    fn without_the_token_or_its_cookie_or_at_another_host_a_request_is_refused() {
        let s = session();
        let root = at(&s, "/");
        assert!(matches!(
            s.admit(&root, "", &headers("127.0.0.1:4321", None)),
            Admission::Refused(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            s.admit(
                &root,
                "",
                &headers("127.0.0.1:4321", Some("auditctl_ui_4321=guess"))
            ),
            Admission::Refused(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            s.admit(&root, "token=guess", &headers("127.0.0.1:4321", None)),
            Admission::Refused(StatusCode::FORBIDDEN, why) if why.contains("not this viewer's")
        ));
        let query = s.url().split_once('?').unwrap().1.to_owned();
        assert!(matches!(
            s.admit(&root, &query, &headers("attacker.example:4321", None)),
            Admission::Refused(StatusCode::FORBIDDEN, why) if why.contains("127.0.0.1")
        ));
        // The token without the secret: refused, and not used up.
        assert!(matches!(
            s.admit("/", &query, &headers("127.0.0.1:4321", None)),
            Admission::Refused(StatusCode::NOT_FOUND, _)
        ));
        // The right token still works after those.
        assert!(matches!(
            s.admit(&root, &query, &headers("127.0.0.1:4321", None)),
            Admission::Enter { .. }
        ));
    }

    #[test]
    fn only_a_post_from_the_viewers_own_origin_changes_anything() {
        let s = session();
        let with = |origin: &str| {
            let mut h = headers("127.0.0.1:4321", None);
            h.insert(http::header::ORIGIN, HeaderValue::from_str(origin).unwrap());
            s.same_origin(&h)
        };
        assert!(with("http://127.0.0.1:4321"));
        assert!(with("http://localhost:4321"));
        for other in [
            "null",
            "http://127.0.0.1:4322",
            "https://127.0.0.1:4321",
            "http://evil.example",
        ] {
            assert!(!with(other), "{other}");
        }
        assert!(
            !s.same_origin(&headers("127.0.0.1:4321", None)),
            "no Origin"
        );
    }
}
