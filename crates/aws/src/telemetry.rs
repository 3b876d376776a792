//! Owns what both Lambda functions (the receiver and the archiver) read from and write to the
//! Lambda runtime: the time left before the invocation's deadline, the CloudWatch EMF metrics
//! document of one invocation (`Metrics`), written as one line, and how the summary lines give
//! durations, ages and per-reason counts. Must not know either function's batch, nor any clock or
//! stream but the ones it is given.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The time left before Lambda's deadline (the context's epoch milliseconds); `None` for 0 (a
/// test's default context: no deadline). `cargo lambda watch` sends its invoke timeout as a
/// duration (for example `600000`) rather than an epoch time; a value before 2001 cannot be an
/// epoch deadline, so it is read as milliseconds from `now` instead of as a deadline long past.
pub fn time_left(deadline_ms: u64, now: SystemTime) -> Option<Duration> {
    const EPOCH_MS_2001: u64 = 1_000_000_000_000;
    Some(match deadline_ms {
        0 => return None,
        relative if relative < EPOCH_MS_2001 => Duration::from_millis(relative),
        epoch => (UNIX_EPOCH + Duration::from_millis(epoch))
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    })
}

/// Lambda's deadline (the context's epoch milliseconds) as an instant of tokio's clock (which a
/// test can pause), read as `time_left` reads it (0: no deadline; `cargo lambda watch`'s
/// relative timeout).
pub fn deadline_instant(deadline_ms: u64) -> Option<tokio::time::Instant> {
    time_left(deadline_ms, SystemTime::now()).map(|left| tokio::time::Instant::now() + left)
}

/// One metric of an EMF document: its name, unit and value.
pub type Metric = (String, &'static str, Value);

/// The CloudWatch EMF document of one invocation: the metrics under `namespace`, with the
/// `FunctionName` dimension when the function's name is known.
pub fn emf_document(
    namespace: &str,
    metrics: Vec<Metric>,
    timestamp_ms: i64,
    function_name: Option<&str>,
) -> Value {
    let dimensions = match function_name {
        Some(_) => json!([["FunctionName"]]),
        None => json!([[]]),
    };
    let directives: Vec<Value> = metrics
        .iter()
        .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut document = Map::new();
    document.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": dimensions, "Metrics": directives}],
        }),
    );
    if let Some(name) = function_name {
        document.insert("FunctionName".into(), json!(name));
    }
    for (name, _, value) in metrics {
        document.insert(name, value);
    }
    Value::Object(document)
}

/// The metrics of one invocation, in the order they are added: what both functions build their
/// EMF document from.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    metrics: Vec<Metric>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// A metric of any unit.
    pub fn add(&mut self, name: impl Into<String>, unit: &'static str, value: impl Into<Value>) {
        self.metrics.push((name.into(), unit, value.into()));
    }

    /// A count.
    pub fn count(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.add(name, "Count", value);
    }

    /// A count of trouble (records failed or dead-lettered, tampering, conflicts, …), declared
    /// only when it is not zero: CloudWatch bills a custom metric for each hour it receives data,
    /// so a metric that stays zero costs nothing, and every alarm on such a count reads missing
    /// data as zero (`TreatMissingData: notBreaching`, or `FILL(m, 0)` in its math). The summary
    /// log line still carries the count.
    pub fn trouble(&mut self, name: impl Into<String>, count: usize) {
        if count > 0 {
            self.count(name, count);
        }
    }

    /// A duration in milliseconds.
    pub fn millis(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.add(name, "Milliseconds", value);
    }

    /// The EMF document of these metrics under `namespace` (`emf_document`).
    pub fn document(
        self,
        namespace: &str,
        timestamp_ms: i64,
        function_name: Option<&str>,
    ) -> Value {
        emf_document(namespace, self.metrics, timestamp_ms, function_name)
    }
}

/// A duration in whole milliseconds: a summary line's `duration_ms` and the `DurationMs` metric.
pub fn whole_millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// The milliseconds from `then` to `now` (an age or a lag); 0 when `then` is later.
pub fn millis_since(then: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    u64::try_from((now - then).num_milliseconds()).unwrap_or(0)
}

/// Counts by reason as a summary line gives them: `code=n`, joined with commas, in the order
/// given (a `BTreeMap`'s: by code).
pub fn by_reason<K, N>(counts: impl IntoIterator<Item = (K, N)>) -> String
where
    K: std::fmt::Display,
    N: std::fmt::Display,
{
    counts
        .into_iter()
        .map(|(code, n)| format!("{code}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints a document on stdout as one line (`write_line`).
pub fn emit(document: &Value) {
    write_line(&mut std::io::stdout().lock(), document);
}

/// Writes a document as one line in one write(2): `writeln!` through stdout's 1 KiB line buffer
/// splits a longer document into several writes, which another writer on the same pipe can cut
/// into (seen in the 100,000-message soak under cargo lambda watch: one document lost of 12,888).
pub fn write_line(out: &mut impl Write, document: &Value) {
    let mut line = document.to_string();
    line.push('\n');
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_epoch_milliseconds_or_cargo_lambdas_relative_timeout() {
        let now = UNIX_EPOCH + Duration::from_secs(1_795_341_600);
        let now_ms = 1_795_341_600_000;
        assert_eq!(time_left(0, now), None);
        assert_eq!(
            time_left(now_ms + 30_000, now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(time_left(now_ms - 5_000, now), Some(Duration::ZERO));
        assert_eq!(time_left(600_000, now), Some(Duration::from_secs(600)));
    }

    #[test]
    fn the_document_is_emf_with_the_function_dimension_when_named() {
        let metrics = vec![("Written".to_string(), "Count", json!(3))];
        let doc = emf_document("Ns", metrics.clone(), 7, Some("f"));
        assert_eq!(doc["_aws"]["Timestamp"], 7);
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "Ns");
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(
            directive["Metrics"],
            json!([{"Name": "Written", "Unit": "Count"}])
        );
        assert_eq!(doc["FunctionName"], "f");
        assert_eq!(doc["Written"], 3);
        let unnamed = emf_document("Ns", metrics, 7, None);
        assert_eq!(
            unnamed["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[]])
        );
        assert!(unnamed.get("FunctionName").is_none());
    }

    #[test]
    fn metrics_keep_their_order_and_units() {
        let mut metrics = Metrics::new();
        metrics.count("Written", 3);
        metrics.millis("DurationMs", 12u64);
        metrics.add("ArchivedBytes", "Bytes", 100);
        let doc = metrics.document("Ns", 7, None);
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([
                {"Name": "Written", "Unit": "Count"},
                {"Name": "DurationMs", "Unit": "Milliseconds"},
                {"Name": "ArchivedBytes", "Unit": "Bytes"}
            ])
        );
        assert_eq!(doc["DurationMs"], 12);
    }

    #[test]
    fn durations_ages_and_reasons_read_as_the_summary_lines_give_them() {
        assert_eq!(whole_millis(Duration::from_micros(7_900)), 7);
        let now = DateTime::from_timestamp_millis(1_795_341_602_500).unwrap_or_default();
        let then = DateTime::from_timestamp_millis(1_795_341_600_000).unwrap_or_default();
        assert_eq!(millis_since(then, now), 2_500);
        assert_eq!(millis_since(now, then), 0);
        let counts: std::collections::BTreeMap<&str, usize> =
            [("throttled", 2), ("conflict", 1)].into_iter().collect();
        assert_eq!(by_reason(counts), "conflict=1,throttled=2");
        assert_eq!(by_reason(Vec::<(&str, usize)>::new()), "");
    }

    #[test]
    fn a_document_is_one_line() {
        let mut out = Vec::new();
        write_line(&mut out, &json!({"a": 1}));
        assert_eq!(out, b"{\"a\":1}\n");
    }

    #[test]
    fn deadline_is_read_as_epoch_time_or_as_an_emulator_duration() {
        assert_eq!(deadline_instant(0), None);
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let left = |d: Option<tokio::time::Instant>| {
            d.unwrap()
                .saturating_duration_since(tokio::time::Instant::now())
        };
        let epoch = left(deadline_instant(now_ms + 30_000));
        assert!(
            epoch > Duration::from_secs(29) && epoch <= Duration::from_secs(30),
            "{epoch:?}"
        );
        assert_eq!(left(deadline_instant(now_ms - 5_000)), Duration::ZERO);
        let relative = left(deadline_instant(600_000));
        assert!(
            relative > Duration::from_secs(599) && relative <= Duration::from_secs(600),
            "{relative:?}"
        );
    }
}
