//! Owns which OCSF class and activity an action's words say (docs/ocsf.md "Class and activity"):
//! sign-in verbs make an Authentication, CRUD verbs an API Activity's activity. Must not know the
//! archived line or any envelope: it reads one action name.

/// The OCSF classes an event maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// API Activity (6003), the default.
    ApiActivity,
    /// Authentication (3002): sign-in and sign-out actions.
    Authentication,
}

impl Class {
    pub const fn uid(self) -> i64 {
        match self {
            Self::ApiActivity => 6003,
            Self::Authentication => 3002,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::ApiActivity => "API Activity",
            Self::Authentication => "Authentication",
        }
    }

    pub const fn category_uid(self) -> i64 {
        match self {
            Self::ApiActivity => 6,
            Self::Authentication => 3,
        }
    }

    pub const fn category_name(self) -> &'static str {
        match self {
            Self::ApiActivity => "Application Activity",
            Self::Authentication => "Identity & Access Management",
        }
    }
}

/// What the action did, as its verb says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// No action at all (an event with `auditText` only).
    Unknown,
    Create,
    Read,
    Update,
    Delete,
    Logon,
    Logoff,
    /// An action whose words hold no verb of the tables below.
    Other,
}

impl Activity {
    /// The class an activity belongs to.
    pub const fn class(self) -> Class {
        match self {
            Self::Logon | Self::Logoff => Class::Authentication,
            _ => Class::ApiActivity,
        }
    }

    /// OCSF's `activity_id`: API Activity's 1 to 4, Authentication's Logon 1 and Logoff 2.
    pub const fn id(self) -> i64 {
        match self {
            Self::Unknown => 0,
            Self::Create | Self::Logon => 1,
            Self::Read | Self::Logoff => 2,
            Self::Update => 3,
            Self::Delete => 4,
            Self::Other => 99,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::Create => "Create",
            Self::Read => "Read",
            Self::Update => "Update",
            Self::Delete => "Delete",
            Self::Logon => "Logon",
            Self::Logoff => "Logoff",
            Self::Other => "Other",
        }
    }

    /// The activity of an action (`None`: the event has none). Its words are its letters and
    /// digits split at every other character and at each lower-to-upper case change
    /// (`s3:DeleteBucket` → `s3 delete bucket`, `user.signed_in` → `user signed in`). A sign-in or
    /// sign-out anywhere makes it an Authentication; else the first CRUD verb decides; else
    /// `Other`.
    pub fn of(action: Option<&str>) -> Self {
        let Some(action) = action else {
            return Self::Unknown;
        };
        let words = words(action);
        let pairs = words.windows(2).map(|w| format!("{}{}", w[0], w[1]));
        let joined: Vec<String> = words.iter().cloned().chain(pairs).collect();
        if joined.iter().any(|w| LOGON.contains(&w.as_str())) {
            return Self::Logon;
        }
        if joined.iter().any(|w| LOGOFF.contains(&w.as_str())) {
            return Self::Logoff;
        }
        words
            .iter()
            .find_map(|word| {
                CRUD.iter()
                    .find(|(_, verbs)| verbs.contains(&word.as_str()))
                    .map(|(activity, _)| *activity)
            })
            .unwrap_or(Self::Other)
    }
}

/// Sign-in words, alone or as two words run together (`sign in`, `log on`, `logged in`).
const LOGON: [&str; 7] = [
    "login", "logon", "signin", "signon", "loggedin", "signedin", "loggedon",
];
/// Sign-out words, alone or as two words run together.
const LOGOFF: [&str; 6] = [
    "logout",
    "logoff",
    "signout",
    "signoff",
    "loggedout",
    "signedout",
];

/// The CRUD verbs, present and past. `put` and `set` overwrite: an update.
const CRUD: [(Activity, &[&str]); 4] = [
    (
        Activity::Create,
        &[
            "create",
            "created",
            "add",
            "added",
            "insert",
            "inserted",
            "register",
            "registered",
        ],
    ),
    (
        Activity::Read,
        &[
            "read",
            "get",
            "list",
            "listed",
            "describe",
            "described",
            "view",
            "viewed",
            "fetch",
            "fetched",
            "search",
            "searched",
            "query",
            "queried",
            "lookup",
            "head",
            "download",
            "downloaded",
            "export",
            "exported",
        ],
    ),
    (
        Activity::Update,
        &[
            "update", "updated", "modify", "modified", "edit", "edited", "change", "changed",
            "put", "set", "patch", "patched", "rename", "renamed", "replace", "replaced",
        ],
    ),
    (
        Activity::Delete,
        &[
            "delete",
            "deleted",
            "remove",
            "removed",
            "destroy",
            "destroyed",
            "purge",
            "purged",
            "terminate",
            "terminated",
            "drop",
            "dropped",
        ],
    ),
];

/// The lower-case words of an action.
fn words(action: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in action.chars() {
        if !c.is_alphanumeric() {
            previous_lower = false;
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actions_words_split_at_punctuation_and_case_changes() {
        assert_eq!(words("s3:DeleteBucket"), ["s3", "delete", "bucket"]);
        assert_eq!(words("user.signed_in"), ["user", "signed", "in"]);
        assert_eq!(words("ConsoleLogin"), ["console", "login"]);
        assert_eq!(words("GetACL"), ["get", "acl"]);
    }

    #[test]
    fn each_crud_verb_gives_its_api_activity() {
        for (action, activity, id) in [
            ("user.create", Activity::Create, 1),
            ("com.example.order.created", Activity::Create, 1),
            ("iam:AddUserToGroup", Activity::Create, 1),
            ("s3:GetObject", Activity::Read, 2),
            ("ec2:DescribeInstances", Activity::Read, 2),
            ("report.export", Activity::Read, 2),
            ("invoice.update", Activity::Update, 3),
            ("s3:PutBucketPolicy", Activity::Update, 3),
            ("s3:DeleteBucket", Activity::Delete, 4),
            ("card.removed", Activity::Delete, 4),
            ("invoice.pay", Activity::Other, 99),
            ("dataset.reset", Activity::Other, 99),
        ] {
            let got = Activity::of(Some(action));
            assert_eq!(
                (got, got.id(), got.class()),
                (activity, id, Class::ApiActivity),
                "{action}"
            );
        }
        assert_eq!(Activity::of(None), Activity::Unknown);
        assert_eq!(Activity::Unknown.id(), 0);
    }

    #[test]
    fn sign_in_and_sign_out_verbs_make_an_authentication() {
        for action in [
            "user.login",
            "signin:ConsoleLogin",
            "session.logon",
            "user.sign_in",
            "SignIn",
            "user.logged-in",
        ] {
            let got = Activity::of(Some(action));
            assert_eq!(
                (got, got.id(), got.class()),
                (Activity::Logon, 1, Class::Authentication),
                "{action}"
            );
        }
        for action in [
            "user.logout",
            "session.log_off",
            "SignOut",
            "user.signed.out",
        ] {
            let got = Activity::of(Some(action));
            assert_eq!(
                (got, got.id(), got.class()),
                (Activity::Logoff, 2, Class::Authentication),
                "{action}"
            );
        }
        assert_eq!(
            Class::Authentication.uid() * 100 + Activity::Logon.id(),
            300_201
        );
    }
}
