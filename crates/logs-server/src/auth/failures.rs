//! The failed-authentication limit: a client address that got `limit` 401s within `window`
//! is answered 429 `too_many_failed_authentications` (with `Retry-After`) until the window
//! ends, without its tokens being checked — a valid token from that address included, so
//! guessing costs the same whatever is guessed. An IPv6 client counts per /64 (what one host
//! usually holds); an IPv4-mapped address as IPv4.
//!
//! Memory is bounded: at most [`MAX_TRACKED`] addresses; when full, expired windows go first,
//! then the oldest eighth.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most addresses tracked at once.
pub const MAX_TRACKED: usize = 100_000;

/// An address as the limit counts it: IPv4, or the first 64 bits of IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    V4(u32),
    V6Prefix(u64),
}

impl Key {
    fn of(ip: IpAddr) -> Key {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Key::V4(u32::from(v4)),
            IpAddr::V6(v6) => Key::V6Prefix((u128::from(v6) >> 64) as u64),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// The failures per address (see the module documentation).
#[derive(Debug)]
pub struct FailureLimit {
    limit: u32,
    window: Duration,
    max_tracked: usize,
    windows: Mutex<HashMap<Key, Window>>,
}

impl FailureLimit {
    /// At most `limit` failures per `window`; `limit` 0 turns the limit off.
    pub fn new(limit: u32, window: Duration) -> FailureLimit {
        FailureLimit::bounded(limit, window, MAX_TRACKED)
    }

    fn bounded(limit: u32, window: Duration, max_tracked: usize) -> FailureLimit {
        FailureLimit { limit, window, max_tracked, windows: Mutex::new(HashMap::new()) }
    }

    /// `Err(wait)`: the address is over the limit for `wait` more.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        if self.limit == 0 {
            return Ok(());
        }
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        match windows.get(&Key::of(ip)) {
            Some(w) if w.failures >= self.limit && now < w.started + self.window => {
                Err(w.started + self.window - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a 401 answered to `ip`.
    pub fn record(&self, ip: IpAddr, now: Instant) {
        if self.limit == 0 {
            return;
        }
        let key = Key::of(ip);
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= self.max_tracked && !windows.contains_key(&key) {
            self.make_room(&mut windows, now);
        }
        let window = windows.entry(key).or_insert(Window { started: now, failures: 0 });
        if now >= window.started + self.window {
            *window = Window { started: now, failures: 0 };
        }
        window.failures = window.failures.saturating_add(1);
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.windows.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn make_room(&self, windows: &mut HashMap<Key, Window>, now: Instant) {
        windows.retain(|_, w| now < w.started + self.window);
        if windows.len() >= self.max_tracked {
            let mut starts: Vec<Instant> = windows.values().map(|w| w.started).collect();
            let eighth = (starts.len() / 8).max(1);
            let (_, cut, _) = starts.select_nth_unstable(eighth - 1);
            let cut = *cut;
            windows.retain(|_, w| w.started > cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_over_the_limit_waits_for_the_end_of_its_window() {
        let limit = FailureLimit::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(limit.check(ip("192.0.2.1"), t0), Ok(()), "failure {i}");
            limit.record(ip("192.0.2.1"), t0 + Duration::from_secs(i));
        }
        assert_eq!(limit.check(ip("192.0.2.1"), t0 + Duration::from_secs(10)), Err(Duration::from_secs(50)));
        assert_eq!(limit.check(ip("::ffff:192.0.2.1"), t0), Err(Duration::from_secs(60)), "the mapped form");
        assert_eq!(limit.check(ip("192.0.2.2"), t0), Ok(()), "another address");
        assert_eq!(limit.check(ip("192.0.2.1"), t0 + Duration::from_secs(60)), Ok(()), "the window ended");
        limit.record(ip("192.0.2.1"), t0 + Duration::from_secs(61));
        assert_eq!(limit.check(ip("192.0.2.1"), t0 + Duration::from_secs(61)), Ok(()), "a new window");
    }

    #[test]
    fn ipv6_counts_per_64_and_zero_turns_it_off() {
        let limit = FailureLimit::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        limit.record(ip("2001:db8:1:2::1"), t0);
        limit.record(ip("2001:db8:1:2:ffff::9"), t0);
        assert!(limit.check(ip("2001:db8:1:2::77"), t0).is_err());
        assert!(limit.check(ip("2001:db8:1:3::1"), t0).is_ok());
        let off = FailureLimit::new(0, Duration::from_secs(60));
        for _ in 0..100 {
            off.record(ip("192.0.2.1"), t0);
        }
        assert!(off.check(ip("192.0.2.1"), t0).is_ok());
        assert_eq!(off.tracked(), 0);
    }

    #[test]
    fn memory_is_bounded() {
        let limit = FailureLimit::bounded(1, Duration::from_secs(60), 64);
        let t0 = Instant::now();
        for i in 0..1000u32 {
            limit.record(IpAddr::from(i.to_be_bytes()), t0 + Duration::from_millis(u64::from(i)));
            assert!(limit.tracked() <= 64);
        }
        // The newest are still limited; the oldest were dropped.
        assert!(limit.check(IpAddr::from(999u32.to_be_bytes()), t0 + Duration::from_secs(1)).is_err());
        assert!(limit.check(IpAddr::from(0u32.to_be_bytes()), t0 + Duration::from_secs(1)).is_ok());
    }
}
