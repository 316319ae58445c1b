//! Per-device and per-row values: a small hashing RNG, the device population of an app
//! (every attribute derived from the device number, so nothing is stored), and the text
//! forms of ids, addresses and datetimes.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use crate::vocab::{self, Country, ModelFamily, Operator};

/// The SplitMix64 finalizer: a good 64-bit mixing function.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: a tiny, fast RNG for values derived from a key (a device, an error group, a
/// row), so that the same key always gives the same values.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub fn new(key: u64, salt: u64) -> Self {
        SplitMix(mix(key ^ mix(salt.wrapping_add(0x9e37_79b9_7f4a_7c15))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// An index in `0..n` skewed towards 0: `n * u^(eighths/8)`.
    pub fn skewed(&mut self, n: usize, eighths: u32) -> usize {
        ((n as f64 * pow_eighths(self.unit(), eighths)) as usize).min(n - 1)
    }

    /// Picks from `(item, weight)` pairs.
    pub fn weighted<T: Copy>(&mut self, items: &[(T, u32)]) -> T {
        let total: u64 = items.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut x = self.below(total);
        for &(item, w) in items {
            if x < u64::from(w) {
                return item;
            }
            x -= u64::from(w);
        }
        items[items.len() - 1].0
    }
}

/// `x^(eighths/8)` computed with exactly rounded operations only (`sqrt`, `*`), so that the
/// generated data is the same on every platform (`powf` comes from the platform's libm).
pub(crate) fn pow_eighths(x: f64, eighths: u32) -> f64 {
    let s1 = x.sqrt();
    let s2 = s1.sqrt();
    let s3 = s2.sqrt();
    let mut r = 1.0;
    for _ in 0..eighths / 8 {
        r *= x;
    }
    for (bit, factor) in [(4, s1), (2, s2), (1, s3)] {
        if eighths & bit != 0 {
            r *= factor;
        }
    }
    r
}

/// Index into a cumulative distribution (last element = total).
pub(crate) fn sample_cdf(cdf: &[f64], u: f64) -> usize {
    let x = u * cdf[cdf.len() - 1];
    cdf.partition_point(|&c| c <= x).min(cdf.len() - 1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Os {
    Android,
    Ios,
    Windows,
}

impl Os {
    pub const ALL: [Os; 3] = [Os::Android, Os::Ios, Os::Windows];

    pub fn name(self) -> &'static str {
        match self {
            Os::Android => "android",
            Os::Ios => "ios",
            Os::Windows => "windows",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One device of an app's population. Derived, never stored.
#[derive(Debug, Clone)]
pub(crate) struct Device {
    /// Stable per-device hash for values that vary by day or row (IP address).
    pub key: u64,
    pub os: Os,
    pub service_device_id: u64,
    pub manufacturer: &'static str,
    pub model: &'static str,
    pub device_type: &'static str,
    pub os_version: &'static str,
    pub country: &'static Country,
    pub locale: &'static str,
    pub city: Option<&'static str>,
    /// `None` on devices without a SIM (wifi only).
    pub operator: Option<&'static Operator>,
    pub google_aid: Option<u128>,
    pub ios_ifa: Option<u128>,
    pub ios_ifv: Option<u128>,
    pub windows_aid: Option<u128>,
    pub profile_id: Option<u64>,
}

/// A random version-4 UUID.
pub(crate) fn random_uuid(rng: &mut SplitMix) -> u128 {
    let v = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
    (v & !(0xf000u128 << 64) & !(0xc000u128 << 48)) | (0x4000u128 << 64) | (0x8000u128 << 48)
}

/// A random version-4 UUID, or the all-zero one (advertising tracking limited).
fn uuid_or_zero(rng: &mut SplitMix, zero_chance: f64) -> u128 {
    if rng.chance(zero_chance) { 0 } else { random_uuid(rng) }
}

/// Everything the device population of one app depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Population {
    pub seed: u64,
    /// Index into `COUNTRIES` of the app's home market.
    pub home_country: usize,
}

impl Population {
    fn key(&self, n: u64) -> u64 {
        mix(self.seed ^ mix(n))
    }

    /// The OS of device `n` (android ~65%, ios ~33%, windows ~2%), without deriving the rest.
    pub fn os(&self, n: u64) -> Os {
        let u = SplitMix::new(self.key(n), 1).unit();
        if u < 0.65 {
            Os::Android
        } else if u < 0.98 {
            Os::Ios
        } else {
            Os::Windows
        }
    }

    /// The `service_device_id` of device `n`: uniform over u64, so half are above 2^63.
    pub fn service_device_id(&self, n: u64) -> u64 {
        mix(self.key(n) ^ 0x5e41_1ced_0000_0001)
    }

    /// Device number `n` of the app.
    pub fn device(&self, n: u64) -> Device {
        let key = self.key(n);
        let os = self.os(n);
        let mut rng = SplitMix::new(key, 2);
        let (families, versions) = match os {
            Os::Android => (vocab::ANDROID_MODELS, vocab::ANDROID_VERSIONS),
            Os::Ios => (vocab::APPLE_MODELS, vocab::IOS_VERSIONS),
            Os::Windows => (vocab::WINDOWS_MODELS, vocab::WINDOWS_VERSIONS),
        };
        let (manufacturer, model, mut device_type) = pick_model(&mut rng, families, os);
        if rng.chance(0.01) {
            device_type = "unknown";
        }
        let country = if rng.chance(0.35) {
            &vocab::COUNTRIES[self.home_country]
        } else {
            let total: u64 = vocab::COUNTRIES.iter().map(|c| u64::from(c.weight)).sum();
            let (mut index, mut x) = (0, rng.below(total));
            while x >= u64::from(vocab::COUNTRIES[index].weight) {
                x -= u64::from(vocab::COUNTRIES[index].weight);
                index += 1;
            }
            &vocab::COUNTRIES[index]
        };
        let locale = if rng.chance(0.8) { country.locales[0] } else { rng.pick(country.locales) };
        let locale = if rng.chance(0.04) { "en_US" } else { locale };
        let city = (!rng.chance(0.06)).then(|| country.cities[rng.skewed(country.cities.len(), 14)]);
        let sim_chance = match (os, device_type) {
            (Os::Windows, _) => 0.08,
            (_, "tablet") => 0.25,
            _ => 0.9,
        };
        let operator =
            rng.chance(sim_chance).then(|| &country.operators[rng.skewed(country.operators.len(), 12)]);
        let (mut google_aid, mut ios_ifa, mut ios_ifv, mut windows_aid) = (None, None, None, None);
        match os {
            Os::Android => google_aid = Some(uuid_or_zero(&mut rng, 0.05)),
            Os::Ios => {
                ios_ifv = Some(uuid_or_zero(&mut rng, 0.0));
                ios_ifa = Some(uuid_or_zero(&mut rng, 0.4));
            }
            Os::Windows => windows_aid = rng.chance(0.7).then(|| uuid_or_zero(&mut rng, 0.0)),
        }
        let profile_id = rng.chance(0.55).then(|| rng.next_u64());
        Device {
            key,
            os,
            service_device_id: self.service_device_id(n),
            manufacturer,
            model,
            device_type,
            os_version: rng.weighted(versions),
            country,
            locale,
            city,
            operator,
            google_aid,
            ios_ifa,
            ios_ifv,
            windows_aid,
            profile_id,
        }
    }
}

fn pick_model(
    rng: &mut SplitMix,
    families: &'static [ModelFamily],
    os: Os,
) -> (&'static str, &'static str, &'static str) {
    let tablet_chance = match os {
        Os::Android => 0.08,
        Os::Ios => 0.12,
        Os::Windows => 0.1,
    };
    let tablet = rng.chance(tablet_chance);
    loop {
        let (manufacturer, phones, tablets) = &families[rng.skewed(families.len(), 13)];
        let (models, kind) = match (tablet, os) {
            (true, _) => (tablets, "tablet"),
            (false, Os::Windows) => (phones, "unknown"),
            (false, _) => (phones, "phone"),
        };
        if !models.is_empty() {
            return (manufacturer, models[rng.skewed(models.len(), 14)], kind);
        }
    }
}

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Appends the `digits` low hex digits of `v`.
pub(crate) fn push_hex(buf: &mut String, v: u128, digits: u32, upper: bool) {
    let table = if upper { HEX_UPPER } else { HEX_LOWER };
    for i in (0..digits).rev() {
        buf.push(table[((v >> (i * 4)) & 0xf) as usize] as char);
    }
}

/// Appends `v` as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn push_uuid(buf: &mut String, v: u128, upper: bool) {
    for (i, (shift, digits)) in [(96, 8), (80, 4), (64, 4), (48, 4), (0, 12)].into_iter().enumerate() {
        if i > 0 {
            buf.push('-');
        }
        push_hex(buf, v >> shift, digits, upper);
    }
}

/// Appends the device's IP address on `day` over `cell`ular or other network, in IPv6
/// notation: IPv4-mapped (`::ffff:a.b.c.d`) or native IPv6.
pub(crate) fn push_ip(buf: &mut String, device: &Device, day: u32, cell: bool) {
    let mut rng = SplitMix::new(device.key, (u64::from(day) << 1) | u64::from(cell));
    let native_v6 = rng.chance(if cell { 0.55 } else { 0.3 });
    let addr = if native_v6 {
        let (a, b) = rng.pick(device.country.ipv6);
        let r = rng.next_u64();
        let iid = if rng.chance(0.5) { rng.next_u64() } else { rng.below(0x1_0000) };
        Ipv6Addr::new(
            a,
            b,
            (r >> 48) as u16 & 0x0fff,
            (r >> 32) as u16,
            (iid >> 48) as u16,
            (iid >> 32) as u16,
            (iid >> 16) as u16,
            iid as u16,
        )
    } else {
        let (a, b) = rng.pick(device.country.ipv4);
        let r = rng.next_u64();
        std::net::Ipv4Addr::new(a, b, r as u8, ((r >> 8) as u8).max(1)).to_ipv6_mapped()
    };
    let _ = write!(buf, "{addr}");
}

/// Appends `ts` (Unix seconds) as `yyyy-mm-dd hh:mm:ss`, UTC (years 0..=9999).
pub(crate) fn push_datetime(buf: &mut String, ts: i64) {
    let (y, m, d) = civil_from_days(ts.div_euclid(86_400));
    let secs = ts.rem_euclid(86_400);
    let parts = [y / 100, y % 100, m, d, secs / 3600, secs / 60 % 60, secs % 60];
    for (sep, v) in ["", "", "-", "-", " ", ":", ":"].into_iter().zip(parts) {
        buf.push_str(sep);
        buf.push((b'0' + (v / 10) as u8) as char);
        buf.push((b'0' + (v % 10) as u8) as char);
    }
}

/// Year, month, day of a day number since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_match_chrono() {
        let mut buf = String::new();
        for ts in [0, 59, 86_399, 86_400, 951_782_400, 1_791_158_399, 1_793_836_800, 4_102_444_799] {
            buf.clear();
            push_datetime(&mut buf, ts);
            let expected =
                chrono::DateTime::from_timestamp(ts, 0).unwrap().format("%Y-%m-%d %H:%M:%S").to_string();
            assert_eq!(buf, expected);
        }
    }

    #[test]
    fn uuids_are_well_formed() {
        let mut rng = SplitMix::new(1, 2);
        let mut buf = String::new();
        push_uuid(&mut buf, uuid_or_zero(&mut rng, 0.0), false);
        assert_eq!(buf.len(), 36);
        assert_eq!(&buf[14..15], "4");
        assert!(matches!(&buf[19..20], "8" | "9" | "a" | "b"), "{buf}");
        buf.clear();
        push_uuid(&mut buf, 0, true);
        assert_eq!(buf, "00000000-0000-0000-0000-000000000000");
    }

    #[test]
    fn devices_are_stable_and_consistent() {
        let population = Population { seed: 7, home_country: 1 };
        let mut oses = [0usize; 3];
        for n in 0..3000 {
            let d = population.device(n);
            assert_eq!(d.service_device_id, population.device(n).service_device_id);
            oses[d.os.index()] += 1;
            assert_eq!(d.google_aid.is_some(), d.os == Os::Android);
            assert_eq!(d.ios_ifv.is_some(), d.os == Os::Ios);
            assert!(d.os == Os::Windows || d.windows_aid.is_none());
        }
        assert!(oses[0] > 1700 && oses[1] > 800 && oses[2] > 20, "{oses:?}");
    }

    #[test]
    fn ips_are_v6_notation() {
        let population = Population { seed: 3, home_country: 0 };
        let (mut mapped, mut native) = (0, 0);
        let mut buf = String::new();
        for n in 0..500 {
            buf.clear();
            push_ip(&mut buf, &population.device(n), 1, n % 2 == 0);
            let addr: Ipv6Addr = buf.parse().unwrap();
            if addr.to_ipv4_mapped().is_some() {
                assert!(buf.starts_with("::ffff:"), "{buf}");
                mapped += 1;
            } else {
                native += 1;
            }
        }
        assert!(mapped > 100 && native > 100, "{mapped} {native}");
    }
}
