//! Everything fixed about one application for a whole dataset: its names, versions, device
//! population and error groups.

use crate::crash::{AppNames, ErrorGroup, build_groups};
use crate::options::AppSpec;
use crate::values::{Os, Population, SplitMix, mix, pow_eighths, sample_cdf};
use crate::vocab;

/// Exponent, in eighths, of the Zipf-like popularity of error groups (rank^-0.375). Low on
/// purpose: the most common group of a 5M-row dataset has thousands of rows, not a large
/// share of the data.
const GROUP_ZIPF_EIGHTHS: u32 = 3;
/// Device popularity, in eighths: device `n` is chosen as `count * u^1.5`, so a few devices
/// (crash loops) report many errors and most report a few.
const DEVICE_SKEW_EIGHTHS: u32 = 12;

#[derive(Debug)]
pub(crate) struct AppModel {
    pub id: i64,
    pub names: AppNames,
    pub population: Population,
    pub device_count: u64,
    /// Oldest first.
    pub versions: Vec<String>,
    version_cdf: Vec<f64>,
    /// Android groups, then iOS, then Windows.
    pub groups: Vec<ErrorGroup>,
    group_start: [usize; 3],
    group_cdf: [Vec<f64>; 3],
    profile_numeric: bool,
}

impl AppModel {
    /// The model of the app at position `index` of the options, which gets `rows` rows.
    pub fn new(seed: u64, index: usize, spec: &AppSpec, rows: u64) -> Self {
        let app_seed = mix(seed ^ mix(spec.id as u64 ^ 0x5eed_0000_a990));
        let mut rng = SplitMix::new(app_seed, 0);
        let brand = vocab::BRANDS[(mix(seed) as usize).wrapping_add(index) % vocab::BRANDS.len()];
        let lower = brand.to_ascii_lowercase();
        let names = AppNames {
            brand,
            java_package: format!("com.{lower}.app"),
            ios_bundle: format!("com.{lower}.{brand}"),
            windows_package: format!("{brand}Inc.{brand}"),
            host: format!("api.{lower}.com"),
        };

        let versions = make_versions(&mut rng);
        // The newest version is the most common: weight 0.75^age.
        let mut version_weights: Vec<f64> = std::iter::successors(Some(1.0), |w| Some(w * 0.75))
            .take(versions.len())
            .map(|w| w + 0.005)
            .collect();
        version_weights.reverse();
        let version_cdf = cumulative(version_weights.into_iter());

        let total_groups = (rows / 25).clamp(30, 4000) as usize;
        let per_os = [total_groups * 62 / 100, total_groups * 33 / 100, (total_groups * 5 / 100).max(3)];
        let groups = build_groups(app_seed, &per_os);
        let group_start = [0, per_os[0], per_os[0] + per_os[1]];
        let group_cdf = per_os
            .map(|n| cumulative((1..=n).map(|rank| 1.0 / pow_eighths(rank as f64, GROUP_ZIPF_EIGHTHS))));

        AppModel {
            id: spec.id,
            names,
            population: Population {
                seed: app_seed,
                home_country: rng.below(vocab::COUNTRIES.len() as u64) as usize,
            },
            device_count: (rows / 8).max(20),
            versions,
            version_cdf,
            groups,
            group_start,
            group_cdf,
            profile_numeric: rng.chance(0.5),
        }
    }

    pub fn package_name(&self, os: Os) -> &str {
        match os {
            Os::Android => &self.names.java_package,
            Os::Ios => &self.names.ios_bundle,
            Os::Windows => &self.names.windows_package,
        }
    }

    /// An error group of an `os` device; `u` uniform in [0, 1).
    pub fn pick_group(&self, os: Os, u: f64) -> usize {
        self.group_start[os.index()] + sample_cdf(&self.group_cdf[os.index()], u)
    }

    pub fn pick_version(&self, u: f64) -> usize {
        sample_cdf(&self.version_cdf, u)
    }

    pub fn pick_device(&self, u: f64) -> u64 {
        ((self.device_count as f64 * pow_eighths(u, DEVICE_SKEW_EIGHTHS)) as u64).min(self.device_count - 1)
    }

    /// Appends the profile id derived from `profile`.
    pub fn push_profile_id(&self, buf: &mut String, profile: u64) {
        use std::fmt::Write as _;
        if self.profile_numeric {
            let _ = write!(buf, "{}", 100_000 + profile % 99_900_000);
        } else {
            buf.push_str("u_");
            crate::values::push_hex(buf, u128::from(profile), 16, false);
        }
    }
}

fn cumulative(weights: impl Iterator<Item = f64>) -> Vec<f64> {
    weights
        .scan(0.0, |sum, w| {
            *sum += w;
            Some(*sum)
        })
        .collect()
}

/// A few tens of versions like `4.12.0`, oldest first.
fn make_versions(rng: &mut SplitMix) -> Vec<String> {
    let count = 12 + rng.below(20);
    let (mut major, mut minor, mut patch) = (1 + rng.below(8), rng.below(10), 0);
    let mut versions = Vec::with_capacity(count as usize);
    for _ in 0..count {
        versions.push(format!("{major}.{minor}.{patch}"));
        let r = rng.unit();
        if r < 0.6 {
            patch += 1;
        } else if r < 0.95 {
            (minor, patch) = (minor + 1, 0);
        } else {
            (major, minor, patch) = (major + 1, 0, 0);
        }
    }
    versions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_skewed_but_not_dominant() {
        let app = AppModel::new(1, 0, &AppSpec { id: 1001, weight: 80 }, 4_000_000);
        assert_eq!(app.groups.len(), 4000);
        let cdf = &app.group_cdf[0];
        let top_share = cdf[0] / cdf[cdf.len() - 1];
        // 4M rows, ~65% android: the top android group has thousands of rows.
        let top_rows = top_share * 0.65 * 4_000_000.0;
        assert!((2_000.0..20_000.0).contains(&top_rows), "{top_rows}");
        let mut rng = SplitMix::new(5, 5);
        for os in Os::ALL {
            for _ in 0..100 {
                assert_eq!(app.groups[app.pick_group(os, rng.unit())].os, os);
            }
        }
    }

    #[test]
    fn versions_and_devices_are_in_range() {
        let app = AppModel::new(9, 1, &AppSpec { id: 7, weight: 1 }, 1000);
        assert!((12..32).contains(&app.versions.len()));
        assert_eq!(app.pick_version(0.999_999), app.versions.len() - 1);
        assert_eq!(app.pick_device(0.999_999_9), app.device_count - 1);
        assert_eq!(app.pick_device(0.0), 0);
    }
}
