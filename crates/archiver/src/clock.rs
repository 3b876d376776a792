//! Owns the wall clock the archive is named by (the hour and digest period of each object, the
//! marker's write fence) and waiting on it, with a manual twin for tests. Must not know the stream
//! or the bucket. The Lambda deadline is a monotonic `tokio::time::Instant`, not this clock.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Wall-clock time.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// Waits `duration` of this clock's time.
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(duration)
    }
}

/// A clock that moves only when told to, or when someone sleeps on it (at once, by that much).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(now: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(now),
        }
    }

    pub fn set(&self, now: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|p| p.into_inner()) = now;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        self.advance(duration);
        std::future::ready(())
    }
}

impl<C: Clock> Clock for &C {
    fn now(&self) -> DateTime<Utc> {
        (**self).now()
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + Send {
        (**self).sleep(duration)
    }
}
