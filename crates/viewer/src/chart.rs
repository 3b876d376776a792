//! Owns the chart of events per hour by outcome: the counts, drawn as SVG markup with a table in
//! words. Pure: must not know HTTP, the router or how rows are read.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};

use maud::{Markup, html};

/// The outcomes, bottom to top, with their fill; an event without one is `none`.
const STACK: [(&str, &str); 4] = [
    ("success", "#2da44e"),
    ("failure", "#cf222e"),
    ("unknown", "#bf8700"),
    ("none", "#8c959f"),
];

/// Events per hour (`YYYY-MM-DDTHH`, UTC) and outcome.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Hours {
    counts: BTreeMap<String, [u64; 4]>,
    pub total: u64,
}

impl Hours {
    /// Counts one event at `audit_time` with `outcome` ("" when it has none).
    pub fn add(&mut self, audit_time: &str, outcome: &str) {
        let hour = audit_time.get(..13).unwrap_or(audit_time).to_owned();
        let slot = match outcome {
            "success" => 0,
            "failure" => 1,
            "unknown" => 2,
            _ => 3,
        };
        self.counts.entry(hour).or_default()[slot] += 1;
        self.total += 1;
    }
}

/// Every UTC hour from `from`'s to `to`'s (`YYYY-MM-DDTHH`), at most `max`.
fn hours(from: DateTime<Utc>, to: DateTime<Utc>, max: usize) -> Vec<String> {
    let Ok(mut hour) = from.duration_trunc(Duration::hours(1)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while hour <= to && out.len() < max {
        out.push(hour.format("%Y-%m-%dT%H").to_string());
        hour += Duration::hours(1);
    }
    out
}

/// The most hours drawn (30 days).
const MAX_HOURS: usize = 24 * 31;

/// The chart over `from`..`to`, with `note` under it (e.g. that it counts only the newest rows).
/// The SVG's coordinates are numbers computed here; every word goes through maud's escaping.
pub fn render(counts: &Hours, from: DateTime<Utc>, to: DateTime<Utc>, note: &str) -> Markup {
    let hours = hours(from, to, MAX_HOURS);
    let (width, height, left, bottom) = (960.0_f64, 220.0_f64, 48.0_f64, 28.0_f64);
    let plot_w = width - left - 8.0;
    let plot_h = height - bottom - 8.0;
    let peak = hours
        .iter()
        .filter_map(|h| counts.counts.get(h))
        .map(|c| c.iter().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = plot_w / hours.len().max(1) as f64;
    let (axis_y, axis_x, label_x) = (8.0 + plot_h, left + plot_w, left - 4.0);
    let bars = hours.iter().enumerate().filter_map(|(i, hour)| {
        let c = counts.counts.get(hour)?;
        let x = left + i as f64 * bar;
        let mut y = 8.0 + plot_h;
        let words: Vec<String> = STACK
            .iter()
            .zip(c)
            .filter(|(_, n)| **n > 0)
            .map(|((name, _), n)| format!("{n} {name}"))
            .collect();
        let segments: Vec<(String, String, &str)> = STACK
            .iter()
            .zip(c)
            .filter(|(_, n)| **n > 0)
            .map(|((_, fill), n)| {
                let h = plot_h * *n as f64 / peak as f64;
                y -= h;
                (format!("{y:.2}"), format!("{h:.2}"), *fill)
            })
            .collect();
        let (x, w) = (format!("{x:.2}"), format!("{:.2}", (bar - 0.5).max(0.5)));
        Some(html! {
            g {
                title { (hour) ":00 UTC: " (words.join(", ")) }
                @for (y, h, fill) in &segments {
                    rect x=(x) y=(y) width=(w) height=(h) fill=(fill) {}
                }
            }
        })
    });
    let bars: Vec<Markup> = bars.collect();
    let mut totals = [0u64; 4];
    for c in counts.counts.values() {
        for (t, n) in totals.iter_mut().zip(c) {
            *t += n;
        }
    }
    html! {
        figure class="chart-box" {
            figcaption { "Events per hour, stacked by outcome (" (counts.total) " events)" }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (width) " " (height) } role="img"
                aria-labelledby="chart-title" class="chart" {
                title id="chart-title" {
                    "Events per hour, stacked by outcome: " (counts.total) " events, at most "
                    (peak) " in one hour"
                }
                line x1=(left) y1="8" x2=(left) y2=(axis_y) stroke="#57606a" {}
                line x1=(left) y1=(axis_y) x2=(axis_x) y2=(axis_y) stroke="#57606a" {}
                text x=(label_x) y="16" text-anchor="end" font-size="12" { (peak) }
                text x=(label_x) y=(axis_y) text-anchor="end" font-size="12" { "0" }
                @for bar in &bars { (bar) }
                @if let (Some(first), Some(last)) = (hours.first(), hours.last()) {
                    text x=(left) y=(height - 6.0) font-size="12" { (first) ":00" }
                    text x=(axis_x) y=(height - 6.0) font-size="12" text-anchor="end" {
                        (last) ":00 UTC"
                    }
                }
            }
            ul class="legend" {
                @for ((name, fill), n) in STACK.iter().zip(totals) {
                    li {
                        svg width="12" height="12" aria-hidden="true" {
                            rect width="12" height="12" fill=(fill) {}
                        }
                        " " (name) ": " (n)
                    }
                }
            }
            @if !note.is_empty() {
                p class="note" { (note) }
            }
            details {
                summary { "Counts per hour" }
                div class="table-wrap" {
                    table class="rows" {
                        thead {
                            tr {
                                th scope="col" { "Hour (UTC)" }
                                @for (name, _) in STACK { th scope="col" { (name) } }
                            }
                        }
                        tbody {
                            @for (hour, c) in &counts.counts {
                                tr {
                                    td { (hour) ":00" }
                                    @for n in c { td { (n) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn hours_are_counted_by_outcome_and_said_in_words_too() {
        let mut counts = Hours::default();
        counts.add("2026-11-24T10:15:00.000Z", "success");
        counts.add("2026-11-24T10:59:59.999Z", "failure");
        counts.add("2026-11-24T10:00:00.000Z", "failure");
        counts.add("2026-11-24T12:00:00.000Z", "");
        let html = render(
            &counts,
            at("2026-11-24T09:30:00Z"),
            at("2026-11-24T12:30:00Z"),
            "",
        )
        .into_string();
        assert!(
            html.contains("<title>2026-11-24T10:00 UTC: 1 success, 2 failure</title>"),
            "{html}"
        );
        assert!(
            html.contains("<title>2026-11-24T12:00 UTC: 1 none</title>"),
            "{html}"
        );
        assert!(html.contains("failure: 2</li>"), "{html}");
        assert!(html.contains("<td>2026-11-24T10:00</td><td>1</td><td>2</td><td>0</td><td>0</td>"));
        assert!(
            html.contains("2026-11-24T09:00</text>"),
            "from the first hour: {html}"
        );
        assert!(html.contains("(4 events)"));
        assert_eq!(
            html.matches("<rect x=").count(),
            3,
            "three segments in two bars"
        );
    }

    #[test]
    fn thirty_days_are_at_most_a_bar_per_hour() {
        assert_eq!(
            hours(
                at("2026-10-25T12:00:00Z"),
                at("2026-11-24T12:00:00Z"),
                MAX_HOURS
            )
            .len(),
            30 * 24 + 1
        );
    }
}
