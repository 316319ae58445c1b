//! How the rows are split: across apps by weight, across days evenly with a little noise,
//! and across files of at most `max_file_rows` rows. Every split is exact: the parts always
//! add up to the whole.

use crate::options::GenerateOptions;
use crate::values::{SplitMix, mix};

/// The rows of one file (`part-<file>.parquet`, plus its late rows) of one app on one error
/// date (one `application_id=/date=` folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    /// Index into `GenerateOptions::apps`.
    pub app: usize,
    /// Days since `GenerateOptions::start`.
    pub day: u32,
    /// Number of the file in its folder.
    pub file: u32,
    pub rows: u64,
}

/// Rows per app (in the order of `options.apps`).
pub(crate) fn rows_per_app(options: &GenerateOptions) -> Vec<u64> {
    let weights: Vec<u64> = options.apps.iter().map(|a| u64::from(a.weight)).collect();
    split_exact(options.rows, &weights)
}

/// The non-empty parts, largest first (so that parallel workers finish together).
pub(crate) fn plan_parts(options: &GenerateOptions, app_rows: &[u64]) -> Vec<Part> {
    let mut parts = Vec::new();
    for (app, (&rows, spec)) in app_rows.iter().zip(&options.apps).enumerate() {
        // Each day's weight is 1 ± 10%.
        let mut rng = SplitMix::new(mix(options.seed) ^ mix(spec.id as u64), 0xda75);
        let weights: Vec<u64> = (0..options.days).map(|_| rng.between(900, 1100)).collect();
        for (day, rows) in split_exact(rows, &weights).into_iter().enumerate() {
            let files = rows.div_ceil(options.max_file_rows);
            for (file, rows) in split_exact(rows, &vec![1; files as usize]).into_iter().enumerate() {
                parts.push(Part { app, day: day as u32, file: file as u32, rows });
            }
        }
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.rows));
    parts
}

/// Splits `total` in proportion to `weights` (largest remainder method).
fn split_exact(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let quotas: Vec<(u64, u128)> = weights
        .iter()
        .map(|&w| {
            let q = u128::from(total) * u128::from(w);
            ((q / sum) as u64, q % sum)
        })
        .collect();
    let mut parts: Vec<u64> = quotas.iter().map(|&(floor, _)| floor).collect();
    let missing = total - parts.iter().sum::<u64>();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder.sort_by(|&a, &b| quotas[b].1.cmp(&quotas[a].1).then(a.cmp(&b)));
    for &i in by_remainder.iter().take(missing as usize) {
        parts[i] += 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_exactly() {
        assert_eq!(split_exact(100, &[80, 15, 5]), [80, 15, 5]);
        assert_eq!(split_exact(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(split_exact(0, &[3, 4]), [0, 0]);
        assert_eq!(
            split_exact(u64::MAX, &[u64::from(u32::MAX), 1]).iter().map(|&x| u128::from(x)).sum::<u128>(),
            u128::from(u64::MAX)
        );
        for total in [1, 7, 999, 123_457] {
            let parts = split_exact(total, &[900, 1100, 1000, 950]);
            assert_eq!(parts.iter().sum::<u64>(), total);
        }
    }

    #[test]
    fn parts_cover_all_rows() {
        let mut options = GenerateOptions::new("unused");
        options.rows = 100_003;
        let app_rows = rows_per_app(&options);
        assert_eq!(app_rows, [80_002, 15_001, 5_000]);
        let parts = plan_parts(&options, &app_rows);
        assert_eq!(parts.len(), 90);
        assert_eq!(parts.iter().map(|p| p.rows).sum::<u64>(), 100_003);
        let app0: Vec<u64> = parts.iter().filter(|p| p.app == 0).map(|p| p.rows).collect();
        let (min, max) = (app0.iter().min().unwrap(), app0.iter().max().unwrap());
        assert!(*min > 2_100 && *max < 3_000, "{min} {max}");
    }

    #[test]
    fn big_days_are_split_into_files() {
        let mut options = GenerateOptions::new("unused");
        (options.rows, options.days, options.max_file_rows) = (2_500, 1, 1_000);
        options.apps.truncate(1);
        let parts = plan_parts(&options, &rows_per_app(&options));
        let rows: Vec<(u32, u64)> = parts.iter().map(|p| (p.file, p.rows)).collect();
        assert_eq!(rows, [(0, 834), (1, 833), (2, 833)]);
    }
}
