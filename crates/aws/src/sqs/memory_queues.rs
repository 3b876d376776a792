//! Owns the in-memory twin of the queue port (`Sqs`): queues by URL that keep messages, receipt
//! handles, visibility on a logical clock, receive counts and FIFO deduplication as SQS does, and
//! refuse what SQS would. Must not know what a message means or who reads it.
//!
//! Time moves only when a test says so (`advance`): no sleeps. A receive may be made to answer
//! short (`answer_next`), as SQS may while messages remain. Delays and FIFO group ordering are not
//! modelled: no reader of the port uses them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use super::attributes::Attribute;
use super::deadletter::DeadLetter;
use super::memory::{MAX_MESSAGE_BYTES, lock, refusal};
use super::port::{Depth, MAX_BATCH, Receive, Received, Sqs, System, Visibility};
use crate::error::AwsError;

/// SQS's deduplication interval for FIFO queues, in seconds.
const DEDUPLICATION_SECONDS: u64 = 300;
/// The clock's start, in milliseconds since the epoch (`SentTimestamp`).
const EPOCH_MS: u64 = 1_767_225_600_000;

/// SQS, in memory.
#[derive(Debug, Default)]
pub struct MemorySqs {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Seconds since the twin was made.
    now: u64,
    /// The `SenderId` of what is sent through the port.
    caller: String,
    queues: BTreeMap<String, Queue>,
    next: u64,
    /// Every receipt handle given, with its queue and message id.
    handles: HashMap<String, (String, String)>,
    /// Most messages each of the next receives returns.
    short: VecDeque<usize>,
    failing_sends: VecDeque<AwsError>,
    failing_deletes: VecDeque<AwsError>,
}

#[derive(Debug, Default)]
struct Queue {
    arn: String,
    messages: Vec<Stored>,
    /// FIFO: deduplication ids, with when they were sent.
    deduplication: HashMap<String, u64>,
}

#[derive(Debug, Clone)]
struct Stored {
    id: String,
    body: String,
    attributes: BTreeMap<String, Attribute>,
    system: System,
    receives: u64,
    /// Hidden until then (after a receive).
    visible_at: u64,
    /// The latest receive's handle.
    handle: Option<String>,
}

/// A message put straight into a queue, as another sender (or SQS moving it) would.
#[derive(Debug, Clone, Default)]
pub struct Incoming {
    pub letter: DeadLetter,
    /// Its `SenderId`: who sent it.
    pub sender_id: Option<String>,
    /// Its `DeadLetterQueueSourceArn`: SQS moved it here from that queue.
    pub source_arn: Option<String>,
    /// Receives it had before it arrived (SQS keeps the count when it moves a message).
    pub receives: u64,
}

impl MemorySqs {
    /// A twin whose sends through the port carry `caller` as their `SenderId`.
    pub fn new(caller: impl Into<String>) -> Self {
        let twin = Self::default();
        lock(&twin.state).caller = caller.into();
        twin
    }

    /// Makes a queue (`.fifo` at the end of `name` for a FIFO one); its URL.
    pub fn create_queue(&self, name: &str) -> String {
        let url = format!("https://sqs.memory.localhost/000000000000/{name}");
        lock(&self.state).queues.insert(
            url.clone(),
            Queue {
                arn: format!("arn:aws:sqs:memory:000000000000:{name}"),
                ..Queue::default()
            },
        );
        url
    }

    /// The queue's ARN, if it exists.
    pub fn arn(&self, queue_url: &str) -> Option<String> {
        lock(&self.state)
            .queues
            .get(queue_url)
            .map(|q| q.arn.clone())
    }

    /// Puts a message into the queue without the port; its message id.
    pub fn deliver(&self, queue_url: &str, incoming: Incoming) -> Result<String, AwsError> {
        let mut state = lock(&self.state);
        let now = state.now;
        let id = state.id("message");
        let queue = state.queue(queue_url)?;
        queue.messages.push(Stored {
            id: id.clone(),
            body: incoming.letter.body,
            attributes: incoming.letter.attributes,
            system: System {
                sender_id: incoming.sender_id,
                sent_timestamp: Some(sent_timestamp(now)),
                approximate_receive_count: None,
                dead_letter_queue_source_arn: incoming.source_arn,
                message_group_id: incoming.letter.group_id,
            },
            receives: incoming.receives,
            visible_at: now,
            handle: None,
        });
        Ok(id)
    }

    /// Moves the clock on: hidden messages whose visibility timeout ends become visible.
    pub fn advance(&self, seconds: u64) {
        lock(&self.state).now += seconds;
    }

    /// The next receives return at most these many messages each (SQS may answer short, or
    /// empty, while messages remain).
    pub fn answer_next(&self, most: impl IntoIterator<Item = usize>) {
        lock(&self.state).short.extend(most);
    }

    /// The next sends fail with these errors, in order.
    pub fn fail_next_sends(&self, errors: impl IntoIterator<Item = AwsError>) {
        lock(&self.state).failing_sends.extend(errors);
    }

    /// The next deletes fail with these errors, in order.
    pub fn fail_next_deletes(&self, errors: impl IntoIterator<Item = AwsError>) {
        lock(&self.state).failing_deletes.extend(errors);
    }

    /// The queue's messages, in the order sent, whether visible or not: bodies and attributes as
    /// a reader would receive them, without receiving them.
    pub fn messages(&self, queue_url: &str) -> Vec<Received> {
        lock(&self.state)
            .queues
            .get(queue_url)
            .map(|q| {
                q.messages
                    .iter()
                    .map(|m| m.received(String::new()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl State {
    fn id(&mut self, what: &str) -> String {
        self.next += 1;
        format!("{what}-{:08}", self.next)
    }

    fn queue(&mut self, queue_url: &str) -> Result<&mut Queue, AwsError> {
        self.queues.get_mut(queue_url).ok_or_else(|| {
            AwsError::from_answer(
                400,
                "AWS.SimpleQueueService.NonExistentQueue",
                "The specified queue does not exist for this wsdl version.",
            )
        })
    }
}

impl Stored {
    fn received(&self, receipt_handle: String) -> Received {
        Received {
            message_id: self.id.clone(),
            receipt_handle,
            body: self.body.clone(),
            attributes: self.attributes.clone(),
            system: System {
                approximate_receive_count: Some(self.receives),
                ..self.system.clone()
            },
        }
    }
}

fn sent_timestamp(now: u64) -> String {
    (EPOCH_MS + now * 1000).to_string()
}

fn invalid(message: &str) -> AwsError {
    AwsError::from_answer(400, "InvalidParameterValue", message)
}

impl Sqs for MemorySqs {
    async fn receive(&self, queue_url: &str, request: Receive) -> Result<Vec<Received>, AwsError> {
        if !(1..=MAX_BATCH).contains(&request.max) {
            return Err(invalid(&format!(
                "Value {} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and {MAX_BATCH}, if provided.",
                request.max
            )));
        }
        let mut state = lock(&self.state);
        let now = state.now;
        let most = state
            .short
            .pop_front()
            .unwrap_or(MAX_BATCH)
            .min(request.max);
        let hidden_until = now + u64::try_from(request.visibility_seconds).unwrap_or(0);
        let ids: Vec<usize> = state
            .queue(queue_url)?
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.visible_at <= now)
            .map(|(i, _)| i)
            .take(most)
            .collect();
        let mut received = Vec::with_capacity(ids.len());
        for i in ids {
            let handle = state.id("handle");
            let queue = state.queue(queue_url)?;
            let message = &mut queue.messages[i];
            message.receives += 1;
            message.visible_at = hidden_until;
            message.handle = Some(handle.clone());
            let out = message.received(handle.clone());
            let id = message.id.clone();
            state.handles.insert(handle, (queue_url.to_owned(), id));
            received.push(out);
        }
        Ok(received)
    }

    async fn send(&self, queue_url: &str, message: &DeadLetter) -> Result<(), AwsError> {
        let mut state = lock(&self.state);
        if let Some(error) = state.failing_sends.pop_front() {
            return Err(error);
        }
        state.queue(queue_url)?;
        if let Some(error) = refusal(message, MAX_MESSAGE_BYTES) {
            return Err(invalid(&error.to_string()));
        }
        let fifo = queue_url.ends_with(".fifo");
        if fifo && message.group_id.is_none() {
            return Err(AwsError::from_answer(
                400,
                "MissingParameter",
                "The request must contain the parameter MessageGroupId.",
            ));
        }
        if !fifo && (message.group_id.is_some() || message.deduplication_id.is_some()) {
            return Err(invalid(
                "The request include parameter that is not valid for this queue type",
            ));
        }
        let now = state.now;
        let sender = state.caller.clone();
        if let Some(deduplication_id) = &message.deduplication_id {
            let queue = state.queue(queue_url)?;
            let recent = queue
                .deduplication
                .get(deduplication_id)
                .is_some_and(|at| now < at + DEDUPLICATION_SECONDS);
            if recent {
                // Accepted, and not delivered again.
                return Ok(());
            }
            queue.deduplication.insert(deduplication_id.clone(), now);
        }
        drop(state);
        self.deliver(
            queue_url,
            Incoming {
                letter: message.clone(),
                sender_id: Some(sender),
                ..Incoming::default()
            },
        )
        .map(|_| ())
    }

    async fn delete(&self, queue_url: &str, receipt_handle: &str) -> Result<(), AwsError> {
        let mut state = lock(&self.state);
        if let Some(error) = state.failing_deletes.pop_front() {
            return Err(error);
        }
        state.queue(queue_url)?;
        let known = state
            .handles
            .get(receipt_handle)
            .is_some_and(|(url, _)| url == queue_url);
        if !known {
            return Err(AwsError::from_answer(
                400,
                "ReceiptHandleIsInvalid",
                "The input receipt handle is invalid.",
            ));
        }
        // As SQS: an older handle of a message received since succeeds and deletes nothing.
        state
            .queue(queue_url)?
            .messages
            .retain(|m| m.handle.as_deref() != Some(receipt_handle));
        Ok(())
    }

    async fn change_visibility(
        &self,
        queue_url: &str,
        entries: &[Visibility],
    ) -> Result<usize, AwsError> {
        if entries.len() > MAX_BATCH {
            return Err(AwsError::from_answer(
                400,
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                &format!("Maximum number of entries per request are {MAX_BATCH}."),
            ));
        }
        let mut state = lock(&self.state);
        let now = state.now;
        let queue = state.queue(queue_url)?;
        let mut failed = 0;
        for entry in entries {
            // Only the latest handle of a message in flight (ReceiptHandleIsInvalid,
            // MessageNotInflight otherwise).
            let message = queue.messages.iter_mut().find(|m| {
                m.handle.as_deref() == Some(entry.receipt_handle.as_str()) && m.visible_at > now
            });
            match message {
                Some(message) => {
                    message.visible_at = now + u64::try_from(entry.seconds).unwrap_or(0);
                }
                None => failed += 1,
            }
        }
        Ok(failed)
    }

    async fn depth(&self, queue_url: &str) -> Result<Depth, AwsError> {
        let mut state = lock(&self.state);
        let now = state.now;
        let queue = state.queue(queue_url)?;
        let in_flight = queue.messages.iter().filter(|m| m.visible_at > now).count();
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        Ok(Depth {
            visible: count(queue.messages.len() - in_flight),
            in_flight: count(in_flight),
            delayed: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn letter(body: &str) -> DeadLetter {
        DeadLetter {
            body: body.into(),
            attributes: BTreeMap::from([("tenant".to_owned(), Attribute::string("t"))]),
            group_id: None,
            deduplication_id: None,
        }
    }

    const HOLD: Receive = Receive {
        max: 10,
        visibility_seconds: 30,
        wait_seconds: 0,
    };

    #[tokio::test]
    async fn a_received_message_is_hidden_until_its_visibility_timeout_ends() {
        let sqs = MemorySqs::new("AIDAME");
        let url = sqs.create_queue("dlq");
        sqs.send(&url, &letter("a")).await.unwrap();

        let first = sqs.receive(&url, HOLD).await.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].body, "a");
        assert_eq!(first[0].attributes["tenant"], Attribute::string("t"));
        assert_eq!(first[0].system.sender_id.as_deref(), Some("AIDAME"));
        assert_eq!(first[0].system.approximate_receive_count, Some(1));
        assert!(sqs.receive(&url, HOLD).await.unwrap().is_empty());
        assert_eq!(
            sqs.depth(&url).await.unwrap(),
            Depth {
                visible: 0,
                in_flight: 1,
                delayed: 0
            }
        );

        sqs.advance(30);
        let again = sqs.receive(&url, HOLD).await.unwrap();
        assert_eq!(again[0].system.approximate_receive_count, Some(2));
        assert_ne!(again[0].receipt_handle, first[0].receipt_handle);

        // The old handle deletes nothing; the latest one does.
        sqs.delete(&url, &first[0].receipt_handle).await.unwrap();
        assert_eq!(sqs.depth(&url).await.unwrap().total(), 1);
        sqs.delete(&url, &again[0].receipt_handle).await.unwrap();
        assert_eq!(sqs.depth(&url).await.unwrap().total(), 0);
        let unknown = sqs.delete(&url, "nonsense").await.unwrap_err();
        assert_eq!(unknown.code, "ReceiptHandleIsInvalid");
    }

    #[tokio::test]
    async fn visibility_changes_only_by_the_latest_handle_of_a_message_in_flight() {
        let sqs = MemorySqs::new("AIDAME");
        let url = sqs.create_queue("dlq");
        for body in ["a", "b"] {
            sqs.send(&url, &letter(body)).await.unwrap();
        }
        let held = sqs.receive(&url, HOLD).await.unwrap();
        let release = |m: &Received| Visibility {
            receipt_handle: m.receipt_handle.clone(),
            seconds: 0,
        };
        assert_eq!(
            sqs.change_visibility(&url, &[release(&held[0])])
                .await
                .unwrap(),
            0
        );
        assert_eq!(sqs.depth(&url).await.unwrap().visible, 1);
        // Visible again: no longer in flight.
        assert_eq!(
            sqs.change_visibility(&url, &[release(&held[0])])
                .await
                .unwrap(),
            1
        );
        let eleven = vec![release(&held[1]); 11];
        let error = sqs.change_visibility(&url, &eleven).await.unwrap_err();
        assert_eq!(
            error.code,
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
        );
    }

    #[tokio::test]
    async fn receives_return_at_most_ten_and_short_when_told() {
        let sqs = MemorySqs::new("AIDAME");
        let url = sqs.create_queue("dlq");
        for i in 0..12 {
            sqs.send(&url, &letter(&i.to_string())).await.unwrap();
        }
        let too_many = Receive { max: 11, ..HOLD };
        assert_eq!(
            sqs.receive(&url, too_many).await.unwrap_err().code,
            "InvalidParameterValue"
        );
        sqs.answer_next([0, 3]);
        assert!(sqs.receive(&url, HOLD).await.unwrap().is_empty());
        assert_eq!(sqs.receive(&url, HOLD).await.unwrap().len(), 3);
        assert_eq!(sqs.receive(&url, HOLD).await.unwrap().len(), 9);
    }

    #[tokio::test]
    async fn sends_are_refused_as_sqs_refuses_them() {
        let sqs = MemorySqs::new("AIDAME");
        let url = sqs.create_queue("dlq");
        let missing = sqs
            .send("https://sqs.memory.localhost/0/none", &letter("a"))
            .await
            .unwrap_err();
        assert_eq!(missing.kind, ErrorKind::NotFound);
        assert_eq!(
            sqs.send(&url, &letter("")).await.unwrap_err().kind,
            ErrorKind::Rejected
        );
        let mut crowded = letter("a");
        for i in 0..10 {
            crowded
                .attributes
                .insert(format!("a{i}"), Attribute::string("v"));
        }
        assert!(sqs.send(&url, &crowded).await.is_err());

        let fifo = sqs.create_queue("audit.fifo");
        assert_eq!(
            sqs.send(&fifo, &letter("a")).await.unwrap_err().code,
            "MissingParameter"
        );
        let grouped = DeadLetter {
            group_id: Some("g".into()),
            deduplication_id: Some("d".into()),
            ..letter("a")
        };
        sqs.send(&fifo, &grouped).await.unwrap();
        sqs.send(&fifo, &grouped).await.unwrap();
        assert_eq!(sqs.messages(&fifo).len(), 1, "deduplicated");
        sqs.advance(DEDUPLICATION_SECONDS);
        sqs.send(&fifo, &grouped).await.unwrap();
        assert_eq!(sqs.messages(&fifo).len(), 2, "after the interval");
    }
}
