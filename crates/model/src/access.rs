//! Owns the access queue's rule: only `auditctl` records access to the trail, only through the
//! access queue, and only as the caller AWS says sent it. Must not know SQS, the store or batching.

use crate::Reason;
use crate::message::AuditMessage;

/// The actions of access events: `auditctl.<command>`.
pub const ACCESS_ACTION_PREFIX: &str = "auditctl.";
/// The body field in which `auditctl` names its caller (`sts:GetCallerIdentity`'s `UserId`); an
/// ordinary field, so it lands in the item's `extra`.
pub const CALLER_USER_ID: &str = "callerUserId";

/// Where a delivery came from, as far as this rule cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The access queue (`ACCESS_QUEUE_ARN`): access events only.
    AccessQueue,
    /// Any other queue: anything but access events.
    Other,
}

/// Why a delivery was refused. The text says which check failed, never a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "auditctl.* actions are reserved for access events, which come only through the access queue"
    )]
    ReservedAction,
    #[error("the access queue takes only auditctl.* actions")]
    NotAnAccessAction,
    #[error("the access event has no callerUserId string")]
    NoCallerUserId,
    #[error("the access delivery has no SenderId attribute to check callerUserId against")]
    NoSenderId,
    #[error("callerUserId does not match the delivery's attested SenderId")]
    CallerMismatch,
    #[error(
        "the access event's actor is not the ARN of its attested sender (the role session, federated user, user or root that callerUserId names)"
    )]
    ActorNotCaller,
}

impl Refused {
    pub const fn reason(self) -> Reason {
        match self {
            Self::ReservedAction => Reason::ReservedAction,
            Self::NotAnAccessAction
            | Self::NoCallerUserId
            | Self::NoSenderId
            | Self::CallerMismatch
            | Self::ActorNotCaller => Reason::AccessEventInvalid,
        }
    }
}

/// Whether a parsed message may be written from this source, sent by `sender_id` (the delivery's
/// SQS `SenderId`). From the access queue: an `auditctl.*` action whose `callerUserId` is the
/// attested sender. From any other queue: anything but an `auditctl.*` action.
pub fn check(
    message: &AuditMessage,
    source: Source,
    sender_id: Option<&str>,
) -> Result<(), Refused> {
    let access_action = message
        .fields
        .action
        .as_deref()
        .is_some_and(|action| action.starts_with(ACCESS_ACTION_PREFIX));
    match source {
        Source::Other if access_action => Err(Refused::ReservedAction),
        Source::Other => Ok(()),
        Source::AccessQueue => {
            if !access_action {
                return Err(Refused::NotAnAccessAction);
            }
            let caller = message
                .extra
                .get(CALLER_USER_ID)
                .and_then(serde_json::Value::as_str)
                .ok_or(Refused::NoCallerUserId)?;
            match sender_id {
                None => return Err(Refused::NoSenderId),
                Some(sender) if sender == caller => {}
                Some(_) => return Err(Refused::CallerMismatch),
            }
            match message.fields.actor.as_deref() {
                Some(actor) if actor_is_caller(actor, caller) => Ok(()),
                _ => Err(Refused::ActorNotCaller),
            }
        }
    }
}

/// Whether `actor` (an ARN, as `sts:GetCallerIdentity` gives it) is the identity whose user id is
/// `caller` (the attested `SenderId`), as far as the two can be matched without asking IAM: a
/// role session (`AROA…:<session>`) is an `assumed-role/<role>/<session>` ARN of that session; a
/// federated user (`<account>:<name>`) is `federated-user/<name>` of that account; an account id
/// is that account's `root`; any other id (a user's `AIDA…`) is a `user/…` ARN. So a reader
/// cannot name another person as `actor` (docs/auditctl.md "Access to the trail is itself
/// recorded").
pub fn actor_is_caller(actor: &str, caller: &str) -> bool {
    // arn:<partition>:<service>:<region>:<account>:<resource>
    let mut parts = actor.splitn(6, ':');
    let (Some("arn"), Some(_), Some(service), Some(_), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let all_digits = |t: &str| t.len() == 12 && t.bytes().all(|b| b.is_ascii_digit());
    match caller.split_once(':') {
        Some((id, session)) if id.starts_with("AROA") => {
            service == "sts"
                && resource
                    .strip_prefix("assumed-role/")
                    .and_then(|rest| rest.rsplit_once('/'))
                    .is_some_and(|(role, name)| !role.is_empty() && name == session)
        }
        Some((id, name)) if all_digits(id) => {
            service == "sts"
                && account == id
                && resource.strip_prefix("federated-user/") == Some(name)
        }
        Some(_) => false,
        None if all_digits(caller) => account == caller && resource == "root",
        None => resource.starts_with("user/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLER: &str = "AROAEXAMPLE:alice";

    fn message(body: &str) -> AuditMessage {
        AuditMessage::parse(Some(body), chrono::DateTime::from_timestamp_millis(0)).unwrap()
    }

    fn access(action: &str, caller: &str) -> AuditMessage {
        message(&format!(
            r#"{{"action":"{action}","actor":"arn:aws:sts::123456789012:assumed-role/r/alice","callerUserId":{caller}}}"#
        ))
    }

    #[test]
    fn an_access_event_of_its_attested_sender_is_accepted_from_the_access_queue() {
        let event = access("auditctl.query", &format!(r#""{CALLER}""#));
        assert_eq!(check(&event, Source::AccessQueue, Some(CALLER)), Ok(()));
    }

    #[test]
    fn the_access_queue_refuses_each_failed_check_with_its_own_detail() {
        let caller = format!(r#""{CALLER}""#);
        let cases = [
            (
                message(r#"{"action":"invoice.delete","callerUserId":"x"}"#),
                Some(CALLER),
                Refused::NotAnAccessAction,
            ),
            (
                message(r#"{"auditText":"no action at all"}"#),
                Some(CALLER),
                Refused::NotAnAccessAction,
            ),
            (
                // The prefix is exact: another case or a missing dot is not an access action.
                message(r#"{"action":"AUDITCTL.query","callerUserId":"x"}"#),
                Some(CALLER),
                Refused::NotAnAccessAction,
            ),
            (
                message(r#"{"action":"auditctl.query"}"#),
                Some(CALLER),
                Refused::NoCallerUserId,
            ),
            (
                access("auditctl.get", "42"),
                Some(CALLER),
                Refused::NoCallerUserId,
            ),
            (
                access("auditctl.get", "null"),
                Some(CALLER),
                Refused::NoCallerUserId,
            ),
            (access("auditctl.get", &caller), None, Refused::NoSenderId),
            (
                access("auditctl.get", &caller),
                Some("AIDAOTHERUSER"),
                Refused::CallerMismatch,
            ),
            (
                // A role session is its role id and its session name: both must match.
                access("auditctl.get", &caller),
                Some("AROAEXAMPLE:mallory"),
                Refused::CallerMismatch,
            ),
        ];
        for (event, sender, refused) in cases {
            assert_eq!(
                check(&event, Source::AccessQueue, sender),
                Err(refused),
                "{event:?} from {sender:?}"
            );
            assert_eq!(refused.reason(), Reason::AccessEventInvalid);
            let detail = refused.to_string();
            assert!(
                !detail.contains(CALLER) && !detail.contains("AIDA"),
                "{detail}"
            );
        }
    }

    #[test]
    fn an_access_event_naming_someone_else_as_actor_is_refused() {
        let framed = message(&format!(
            r#"{{"action":"auditctl.query","actor":"arn:aws:sts::123456789012:assumed-role/r/bob","callerUserId":"{CALLER}"}}"#
        ));
        assert_eq!(
            check(&framed, Source::AccessQueue, Some(CALLER)),
            Err(Refused::ActorNotCaller)
        );
        let none = message(&format!(
            r#"{{"action":"auditctl.query","callerUserId":"{CALLER}"}}"#
        ));
        assert_eq!(
            check(&none, Source::AccessQueue, Some(CALLER)),
            Err(Refused::ActorNotCaller)
        );
        assert_eq!(Refused::ActorNotCaller.reason(), Reason::AccessEventInvalid);
    }

    #[test]
    fn the_actor_is_matched_to_each_kind_of_caller_aws_names() {
        let yes = [
            (
                "arn:aws:sts::123456789012:assumed-role/reader/alice",
                "AROAEXAMPLE:alice",
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/a/b/alice",
                "AROAEXAMPLE:alice",
            ),
            ("arn:aws:iam::123456789012:user/ops/bob", "AIDAEXAMPLE"),
            (
                "arn:aws:sts::123456789012:federated-user/carol",
                "123456789012:carol",
            ),
            ("arn:aws:iam::123456789012:root", "123456789012"),
            // moto's STS: an access key id as the user id, a user ARN under sts.
            (
                "arn:aws:sts::123456789012:user/moto",
                "AKIAIOSFODNN7EXAMPLE",
            ),
        ];
        for (actor, caller) in yes {
            assert!(actor_is_caller(actor, caller), "{actor} {caller}");
        }
        let no = [
            (
                "arn:aws:sts::123456789012:assumed-role/reader/bob",
                "AROAEXAMPLE:alice",
            ),
            ("arn:aws:iam::123456789012:user/alice", "AROAEXAMPLE:alice"),
            (
                "arn:aws:sts::123456789012:assumed-role/reader/alice",
                "AIDAEXAMPLE",
            ),
            (
                "arn:aws:sts::123456789012:federated-user/dave",
                "123456789012:carol",
            ),
            (
                "arn:aws:sts::999999999999:federated-user/carol",
                "123456789012:carol",
            ),
            ("arn:aws:iam::999999999999:root", "123456789012"),
            ("alice", "AIDAEXAMPLE"),
            ("arn:aws:iam::123456789012:role/admin", "AIDAEXAMPLE"),
        ];
        for (actor, caller) in no {
            assert!(!actor_is_caller(actor, caller), "{actor} {caller}");
        }
    }

    #[test]
    fn an_auditctl_action_from_another_queue_is_reserved_whoever_sends_it() {
        let event = access("auditctl.dlq.redrive", &format!(r#""{CALLER}""#));
        for sender in [Some(CALLER), None] {
            assert_eq!(
                check(&event, Source::Other, sender),
                Err(Refused::ReservedAction)
            );
        }
        assert_eq!(Refused::ReservedAction.reason(), Reason::ReservedAction);
    }

    #[test]
    fn other_queues_take_every_other_event() {
        for body in [
            r#"{"action":"user.login"}"#,
            r#"{"auditText":"x"}"#,
            r#"{"action":"ops.auditctl.query"}"#,
            r#"{"action":"user.login","callerUserId":"AIDAOTHER"}"#,
        ] {
            assert_eq!(check(&message(body), Source::Other, None), Ok(()), "{body}");
        }
    }
}
