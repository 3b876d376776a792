//! Owns listing the dead-letter queue: receiving until it holds what the queue held, and when it
//! falls short, by how many and why. Must not know a redrive's rules (`redrive.rs`).

use std::time::Duration;

use audit_aws::sqs::{Depth, Sqs};

use super::held::{Held, count};
use super::message::DlqMessage;
use super::{DeadLetterQueue, EMPTY_RECEIVES, Stop};
use crate::Error as TrailError;

/// How long a listing receives at most: well below `HOLD_SECONDS`, so that no message it holds
/// becomes visible again (and is received a second time) while it is still listing.
pub(super) const LIST_SECONDS: u64 = 90;

/// What a listing got: the messages, and when they are not all the queue holds, by how many.
#[derive(Debug)]
pub struct Listing {
    pub messages: Vec<DlqMessage>,
    pub shortfall: Option<Shortfall>,
}

/// A listing short of the queue: how many it listed of how many, why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} {listed} of {total} messages the dead-letter queue holds: {why}")]
pub struct Shortfall {
    /// What the command did with the ones it got: "listed", "saw".
    pub verb: &'static str,
    pub listed: u64,
    pub total: u64,
    pub why: String,
}

impl<Q: Sqs> DeadLetterQueue<Q> {
    /// Every message the queue holds, in the order received; all visible again when it returns.
    /// It receives until it holds as many as the queue held when it began (and a receive brings
    /// nothing new): SQS returns at most 10 a receive, and may return fewer, or none, while
    /// messages remain. When it cannot get them all (in flight with another consumer, delayed,
    /// more than `bound`, or `LIST_SECONDS` spent), the listing says by how many.
    pub async fn list(&self) -> Result<Listing, TrailError> {
        let mut held = Held::default();
        let result = self.list_held(&mut held).await;
        let released = self.release(&held).await;
        let listing = result?;
        released?;
        Ok(listing)
    }

    async fn list_held(&self, held: &mut Held) -> Result<Listing, TrailError> {
        let at_start = self.depth().await?.total();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(LIST_SECONDS);
        let mut messages = Vec::new();
        let mut empty = 0;
        let stop = loop {
            if held.len() >= self.bound {
                break Stop::Bound;
            }
            if tokio::time::Instant::now() >= deadline {
                break Stop::Time;
            }
            let batch = self.receive().await?;
            if held.add(&batch) > 0 {
                messages.extend(batch.into_iter().filter(|m| held.is_first(m)));
                empty = 0;
                continue;
            }
            if count(held.len()) >= at_start {
                return Ok(Listing {
                    messages,
                    shortfall: None,
                });
            }
            empty += 1;
            if empty >= EMPTY_RECEIVES {
                break Stop::Empty;
            }
        };
        // Short of the count at the start, or stopped early: what does the queue hold now? (The
        // rest may have been deleted meanwhile, by a redrive for example.)
        let now = self.depth().await?;
        let listed = count(held.len());
        let shortfall = (now.total() > listed).then(|| Shortfall {
            verb: "listed",
            listed,
            total: now.total(),
            why: self.why_short(stop, now, listed),
        });
        Ok(Listing {
            messages,
            shortfall,
        })
    }

    /// Why a listing got `listed` of what the queue holds (`now`, where the messages this
    /// listing holds are among those in flight), and what to do.
    fn why_short(&self, stop: Stop, now: Depth, listed: u64) -> String {
        let (mut causes, when) = self.causes(now, listed);
        let redrive_first = "redrive what the listed messages explain (auditctl dlq redrive --reason CODE), then run auditctl dlq list again";
        let fix = match stop {
            Stop::Bound => {
                causes.push(format!(
                    "auditctl lists at most {} messages in one command",
                    self.bound
                ));
                redrive_first.to_owned()
            }
            Stop::Time => {
                causes.push(format!(
                    "it stopped receiving after {LIST_SECONDS} s, before the first messages it held would be visible again"
                ));
                redrive_first.to_owned()
            }
            Stop::Empty if when.is_empty() => {
                causes.push(format!(
                    "{EMPTY_RECEIVES} receives in a row brought none of the rest"
                ));
                "run auditctl dlq list again".to_owned()
            }
            Stop::Empty => format!(
                "run auditctl dlq list again once they are visible (when {} ends)",
                when.join(" or ")
            ),
        };
        format!("{}; {fix}", causes.join("; "))
    }

    /// What keeps messages from a command that holds `ours` of them (`now`: the queue's counts,
    /// ours among the in-flight ones): the causes in words, and what must end before they can be
    /// received.
    pub(super) fn causes(&self, now: Depth, ours: u64) -> (Vec<String>, Vec<&'static str>) {
        let are = |n: u64| if n == 1 { "is" } else { "are" };
        let mut causes = Vec::new();
        let mut when = Vec::new();
        let others = now.in_flight.saturating_sub(ours);
        if others > 0 {
            causes.push(format!(
                "{others} {} in flight with another consumer (a redrive, another listing, or a reader that has not deleted them)",
                are(others)
            ));
            when.push("that consumer's visibility timeout");
        }
        if now.delayed > 0 {
            causes.push(format!(
                "{} {} delayed (sent with a delay)",
                now.delayed,
                are(now.delayed)
            ));
            when.push("the delay");
        }
        (causes, when)
    }
}
