//! Error groups (one `error_id` each) and the text of their records: stack traces in the
//! style of each platform, error names and the error JSON.
//!
//! A group's structure (crash type, app frames, line numbers per version) comes from the
//! group's seed, so all records of a group share it; messages, addresses and identifiers
//! vary per record, which makes the text compress like real crash data.

use std::fmt::Write as _;

use crate::templates::{
    APPLE_CRASHES, APPLE_TAILS, BAD_INPUTS, CUSTOM_MESSAGES, DOTNET_CRASHES, DOTNET_TAILS, HTTP_CODES,
    JAVA_CRASHES, JAVA_TAILS,
};
use crate::values::{Os, SplitMix, push_hex, push_uuid, random_uuid};
use crate::vocab::{
    BUTTON_LABELS, CLASS_SUFFIXES, CSHARP_METHODS, CUSTOM_DOMAINS, CUSTOM_SUFFIXES, FEATURES, JAVA_METHODS,
    SWIFT_METHODS, SWIFT_SUFFIXES,
};

/// Names of the app that its crash texts use: in its packages, code and hosts.
#[derive(Debug)]
pub(crate) struct AppNames {
    /// Module / executable name, e.g. `ShopWave`.
    pub brand: &'static str,
    /// Android package and Java package of the app's code, e.g. `com.shopwave.app`.
    pub java_package: String,
    /// iOS bundle id, e.g. `com.shopwave.ShopWave`.
    pub ios_bundle: String,
    /// Windows package name, e.g. `ShopWaveInc.ShopWave`.
    pub windows_package: String,
    /// The app's API host, e.g. `api.shopwave.com`.
    pub host: String,
}

/// A group of identical errors: one `error_id`.
#[derive(Debug)]
pub(crate) struct ErrorGroup {
    /// 32 lowercase hex digits.
    pub id: String,
    pub os: Os,
    /// The `error_name`: an exception class or a custom error name.
    pub name: String,
    kind: Kind,
    seed: u64,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Index into the platform's crash list.
    Crash(usize),
    /// A custom (non-fatal) error reported by the app; index into `CUSTOM_MESSAGES`.
    Custom(usize),
}

/// `per_os[i]` groups for `Os::ALL[i]`, in that order.
pub(crate) fn build_groups(app_seed: u64, per_os: &[usize; 3]) -> Vec<ErrorGroup> {
    let mut groups = Vec::with_capacity(per_os.iter().sum());
    for (os, &count) in Os::ALL.into_iter().zip(per_os) {
        for _ in 0..count {
            let mut g = SplitMix::new(app_seed ^ 0x6e70_0000_0000, groups.len() as u64);
            let (kind, name) = if g.chance(0.3) {
                let name = format!("{}{}", g.pick(CUSTOM_DOMAINS), g.pick(CUSTOM_SUFFIXES));
                (Kind::Custom(g.below(CUSTOM_MESSAGES.len() as u64) as usize), name)
            } else {
                // The crash lists are roughly in order of how common each crash is.
                let (count, name_of): (usize, fn(usize) -> &'static str) = match os {
                    Os::Android => (JAVA_CRASHES.len(), |t| JAVA_CRASHES[t].name),
                    Os::Ios => (APPLE_CRASHES.len(), |t| APPLE_CRASHES[t].name),
                    Os::Windows => (DOTNET_CRASHES.len(), |t| DOTNET_CRASHES[t].name),
                };
                let t = g.skewed(count, 10);
                (Kind::Crash(t), name_of(t).to_owned())
            };
            let mut id = String::with_capacity(32);
            push_hex(&mut id, (u128::from(g.next_u64()) << 64) | u128::from(g.next_u64()), 32, false);
            groups.push(ErrorGroup { id, os, name, kind, seed: g.next_u64() });
        }
    }
    groups
}

/// A class of the app's code: a feature and a role, e.g. `Checkout` + `Fragment`.
#[derive(Debug, Clone, Copy)]
struct Class(&'static str, &'static str);

impl Class {
    fn pick(g: &mut SplitMix, os: Os) -> Class {
        let suffixes = if os == Os::Ios { SWIFT_SUFFIXES } else { CLASS_SUFFIXES };
        Class(g.pick(FEATURES), g.pick(suffixes))
    }

    fn push(self, buf: &mut String) {
        buf.push_str(self.0);
        buf.push_str(self.1);
    }
}

struct Ctx<'a> {
    names: &'a AppNames,
    class: Class,
    version: usize,
}

/// Appends `template` with its `$x` placeholders filled (see `templates`).
fn expand(buf: &mut String, template: &str, ctx: &Ctx, rng: &mut SplitMix) {
    let mut rest = template;
    while let Some(pos) = rest.find('$') {
        buf.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        match after.as_bytes().first() {
            Some(b'i') => _ = write!(buf, "{}", rng.below(40)),
            Some(b'j') => _ = write!(buf, "{}", rng.between(1, 60)),
            Some(b'n') => _ = write!(buf, "{}", rng.between(1000, 99_999_999)),
            Some(b'h') => push_hex(buf, u128::from(rng.next_u64()), 7, false),
            Some(b'a') => push_address(buf, 0x2_8000_0000 + (rng.below(0x8000_0000) & !0xf), 9),
            Some(b'c') => ctx.class.push(buf),
            Some(b'p') => buf.push_str(&ctx.names.java_package),
            Some(b'm') => buf.push_str(ctx.names.brand),
            Some(b's') => buf.push_str(rng.pick(BAD_INPUTS)),
            Some(b'u') => push_uuid(buf, random_uuid(rng), true),
            Some(b'k') => _ = write!(buf, "{}", rng.pick(HTTP_CODES)),
            Some(b'o') => buf.push_str(&ctx.names.host),
            _ => {
                buf.push('$');
                rest = after;
                continue;
            }
        }
        rest = &after[1..];
    }
    buf.push_str(rest);
}

fn push_address(buf: &mut String, addr: u64, digits: u32) {
    buf.push_str("0x");
    push_hex(buf, u128::from(addr), digits, false);
}

fn push_lower(buf: &mut String, s: &str) {
    buf.extend(s.chars().map(|c| c.to_ascii_lowercase()));
}

/// A line number that is fixed for the group and frame, and moves a little between versions.
fn line_number(g: &mut SplitMix, version: usize) -> u64 {
    let base = g.between(18, 900);
    let step = g.between(0, 9);
    base + (version as u64 * step) % 23
}

/// Appends the `error` text of one record of `group`.
pub(crate) fn write_error(
    buf: &mut String,
    names: &AppNames,
    group: &ErrorGroup,
    version: usize,
    rng: &mut SplitMix,
) {
    let mut g = SplitMix::new(group.seed, 0);
    let ctx = Ctx { names, class: Class::pick(&mut g, group.os), version };
    match group.os {
        Os::Android => write_java(buf, &ctx, group, &mut g, rng),
        Os::Ios => write_apple(buf, &ctx, group, &mut g, rng),
        Os::Windows => write_dotnet(buf, &ctx, group, &mut g, rng),
    }
}

fn java_frame(buf: &mut String, ctx: &Ctx, g: &mut SplitMix) {
    let class = Class::pick(g, Os::Android);
    let method = g.pick(JAVA_METHODS);
    let kotlin = g.chance(0.7);
    let lambda = g.chance(0.25) && kotlin;
    let line = line_number(g, ctx.version);
    buf.push_str("\tat ");
    buf.push_str(&ctx.names.java_package);
    buf.push('.');
    push_lower(buf, class.0);
    buf.push('.');
    class.push(buf);
    if lambda {
        let _ = write!(buf, "${method}$1.invokeSuspend(");
    } else {
        let _ = write!(buf, ".{method}(");
    }
    class.push(buf);
    let _ = writeln!(buf, "{}:{line})", if kotlin { ".kt" } else { ".java" });
}

fn write_java(buf: &mut String, ctx: &Ctx, group: &ErrorGroup, g: &mut SplitMix, rng: &mut SplitMix) {
    let (message, top, tail) = match group.kind {
        Kind::Crash(t) => {
            let crash = &JAVA_CRASHES[t];
            buf.push_str(crash.name);
            (crash.message, crash.top, g.pick(JAVA_TAILS))
        }
        Kind::Custom(m) => {
            let _ = write!(buf, "{}.core.errors.{}", ctx.names.java_package, group.name);
            (CUSTOM_MESSAGES[m], &[][..], JAVA_TAILS[1 + g.below(2) as usize])
        }
    };
    if !message.is_empty() {
        buf.push_str(": ");
        expand(buf, message, ctx, rng);
    }
    buf.push('\n');
    for frame in top {
        let _ = writeln!(buf, "\tat {frame}");
    }
    let app_frames = g.between(1, 6);
    for _ in 0..app_frames {
        java_frame(buf, ctx, g);
    }
    for frame in tail {
        let _ = writeln!(buf, "\tat {frame}");
    }
    if matches!(group.kind, Kind::Crash(_)) && g.chance(0.2) {
        let cause = &JAVA_CRASHES[g.below(JAVA_CRASHES.len() as u64) as usize];
        let _ = write!(buf, "Caused by: {}", cause.name);
        if !cause.message.is_empty() {
            buf.push_str(": ");
            expand(buf, cause.message, ctx, rng);
        }
        buf.push('\n');
        for frame in cause.top {
            let _ = writeln!(buf, "\tat {frame}");
        }
        for _ in 0..g.between(1, 2) {
            java_frame(buf, ctx, g);
        }
        let _ = writeln!(buf, "\t... {} more", app_frames as usize + tail.len());
    }
}

/// FNV-1a, for addresses of system symbols that are the same in every group.
fn str_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn apple_frame(buf: &mut String, index: usize, image: &str, addr: u64, symbol: &str) {
    let _ = write!(buf, "{index:<4}{image:<30}\t");
    push_address(buf, addr, 16);
    buf.push(' ');
    buf.push_str(symbol);
}

fn write_apple(buf: &mut String, ctx: &Ctx, group: &ErrorGroup, g: &mut SplitMix, rng: &mut SplitMix) {
    // Per-record ASLR slides of the shared cache and of the app binary.
    let system_base = 0x1_8000_0000 + rng.below(0x8000) * 0x4000;
    let app_base = 0x1_0000_0000 + rng.below(0x1000) * 0x4000;
    buf.push_str("Incident Identifier:\t");
    push_uuid(buf, random_uuid(rng), true);
    let (top, tail, thread) = match group.kind {
        Kind::Crash(t) => {
            let crash = &APPLE_CRASHES[t];
            let _ = write!(buf, "\nException Type:\t{}\n", crash.exception_type);
            if crash.name.starts_with("NS") || crash.name.starts_with("Swift.") {
                let _ = write!(buf, "Exception Reason:\t{}: ", crash.name);
            } else {
                buf.push_str("Termination Reason:\t");
            }
            expand(buf, crash.reason, ctx, rng);
            (crash.top, g.pick(APPLE_TAILS), 0)
        }
        Kind::Custom(m) => {
            let _ = write!(
                buf,
                "\nError Domain={}.{} Code=-{} \"",
                ctx.names.ios_bundle,
                group.name,
                1000 + g.below(100)
            );
            expand(buf, CUSTOM_MESSAGES[m], ctx, rng);
            buf.push_str("\" UserInfo={NSUnderlyingError=");
            push_address(buf, 0x2_8000_0000 + (rng.below(0x8000_0000) & !0xf), 9);
            buf.push_str(" {Error Domain=NSURLErrorDomain Code=-1001 \"The request timed out.\"}}");
            (&[][..], APPLE_TAILS[2], 1 + g.below(8))
        }
    };
    let _ = write!(buf, "\nCrashed Thread:\t{thread}\n\nThread {thread} Crashed:\n");
    let mut index = 0;
    for (image, symbol) in top {
        apple_frame(buf, index, image, system_base + (str_hash(symbol) & 0xfff_fffc), symbol);
        buf.push('\n');
        index += 1;
    }
    for _ in 0..g.between(1, 5) {
        let class = Class::pick(g, Os::Ios);
        let method = g.pick(SWIFT_METHODS);
        let (offset, closure, line) = (g.between(4, 2000) & !3, g.chance(0.2), line_number(g, ctx.version));
        apple_frame(
            buf,
            index,
            ctx.names.brand,
            app_base + (g.below(0x20_0000) & !3),
            if closure { "closure #1 in " } else { "" },
        );
        class.push(buf);
        let _ = write!(buf, ".{method} + {offset} (");
        class.push(buf);
        let _ = writeln!(buf, ".swift:{line})");
        index += 1;
    }
    for (image, symbol) in tail {
        let (image, base) =
            if image.is_empty() { (ctx.names.brand, app_base) } else { (*image, system_base) };
        apple_frame(buf, index, image, base + (str_hash(symbol) & 0xfff_fffc), symbol);
        buf.push('\n');
        index += 1;
    }
}

fn write_dotnet(buf: &mut String, ctx: &Ctx, group: &ErrorGroup, g: &mut SplitMix, rng: &mut SplitMix) {
    let (message, top) = match group.kind {
        Kind::Crash(t) => {
            buf.push_str(DOTNET_CRASHES[t].name);
            (DOTNET_CRASHES[t].message, DOTNET_CRASHES[t].top)
        }
        Kind::Custom(m) => {
            let _ = write!(buf, "{}.Errors.{}Exception", ctx.names.brand, group.name);
            (CUSTOM_MESSAGES[m], &[][..])
        }
    };
    buf.push_str(": ");
    expand(buf, message, ctx, rng);
    buf.push_str("\r\n");
    for frame in top {
        let _ = write!(buf, "   at {frame}\r\n");
    }
    for _ in 0..g.between(1, 6) {
        let class = Class::pick(g, Os::Windows);
        let method = g.pick(CSHARP_METHODS);
        let line = line_number(g, ctx.version);
        let brand = ctx.names.brand;
        let _ = write!(buf, "   at {brand}.{}.", class.0);
        class.push(buf);
        let _ = write!(buf, ".{method} in D:\\a\\1\\s\\src\\{brand}\\{}\\", class.0);
        class.push(buf);
        let _ = write!(buf, ".cs:line {line}\r\n");
    }
    let tail = g.pick(DOTNET_TAILS);
    if g.chance(0.5) {
        buf.push_str("--- End of stack trace from previous location ---\r\n");
    }
    for frame in tail {
        let _ = write!(buf, "   at {frame}\r\n");
    }
}

/// Appends `s` escaped for the inside of a JSON string.
fn push_json_escaped(buf: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\t' => buf.push_str("\\t"),
            '\n' => buf.push_str("\\n"),
            c => buf.push(c),
        }
    }
}

/// Appends the `error_json` of one record of `group`: a small JSON object.
pub(crate) fn write_error_json(buf: &mut String, names: &AppNames, group: &ErrorGroup, rng: &mut SplitMix) {
    let mut g = SplitMix::new(group.seed, 0);
    let class = Class::pick(&mut g, group.os);
    let fatal = matches!(group.kind, Kind::Crash(_));
    let thread = match (group.os, rng.below(4)) {
        (Os::Android, 0 | 1) | (Os::Windows, 0) => "main",
        (Os::Android, 2) => "DefaultDispatcher-worker-3",
        (Os::Android, _) => "OkHttp Dispatcher",
        (Os::Ios, 0 | 1) => "com.apple.main-thread",
        (Os::Ios, _) => "NSOperationQueue 0x28c1 (QOS: UTILITY)",
        (Os::Windows, _) => ".NET ThreadPool Worker",
    };
    let _ = write!(buf, "{{\"fatal\":{fatal},\"thread\":\"{thread}\",\"screen\":\"{}", class.0);
    buf.push_str(match group.os {
        Os::Android => "Fragment",
        Os::Ios => "ViewController",
        Os::Windows => "Page",
    });
    buf.push_str("\",\"session\":{\"id\":\"");
    push_hex(buf, u128::from(rng.next_u64()), 16, false);
    let total_mb = [2048, 3072, 3712, 5632, 7680, 11_264][rng.below(6) as usize];
    let _ = write!(
        buf,
        "\",\"duration_ms\":{}}},\"memory\":{{\"free_mb\":{},\"total_mb\":{total_mb}}},\"battery\":0.{:02},\"charging\":{},\"orientation\":\"{}\",\"breadcrumbs\":[\"app_start\"",
        rng.between(200, 3_600_000),
        rng.between(20, total_mb * 6 / 10),
        rng.below(100),
        rng.chance(0.3),
        if rng.chance(0.85) { "portrait" } else { "landscape" },
    );
    for _ in 0..rng.below(5) {
        if rng.chance(0.5) {
            let _ = write!(buf, ",\"screen:{}\"", rng.pick(FEATURES));
        } else {
            buf.push_str(",\"tap:\\\"");
            push_json_escaped(buf, rng.pick(BUTTON_LABELS));
            buf.push_str("\\\"\"");
        }
    }
    buf.push(']');
    if !fatal {
        let _ = write!(
            buf,
            ",\"attributes\":{{\"code\":{},\"retry\":{},\"host\":\"{}\"}}",
            rng.pick(HTTP_CODES),
            rng.below(4),
            names.host
        );
    }
    if rng.chance(0.4) {
        buf.push_str(",\"ab\":{\"new_");
        push_lower(buf, rng.pick(FEATURES));
        let _ = write!(buf, "\":\"{}\"}}", ["a", "b", "control"][rng.below(3) as usize]);
    }
    buf.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppModel;
    use crate::options::AppSpec;

    #[test]
    fn texts_have_realistic_shape() {
        let app = AppModel::new(1, 0, &AppSpec { id: 1001, weight: 1 }, 100_000);
        let mut rng = SplitMix::new(1, 1);
        let (mut buf, mut json) = (String::new(), String::new());
        let (mut min, mut max, mut total) = (usize::MAX, 0, 0);
        for group in &app.groups {
            buf.clear();
            write_error(&mut buf, &app.names, group, 3, &mut rng);
            min = min.min(buf.len());
            max = max.max(buf.len());
            total += buf.len();
            assert!(buf.contains('\n'), "{buf}");
            json.clear();
            write_error_json(&mut json, &app.names, group, &mut rng);
            assert!(json.starts_with('{') && json.ends_with('}') && json.contains("\"fatal\""), "{json}");
            assert_eq!(json.matches('{').count(), json.matches('}').count(), "{json}");
        }
        let mean = total / app.groups.len();
        assert!(min >= 150 && max <= 3000 && (400..1500).contains(&mean), "{min} {max} {mean}");
        let mut names: Vec<_> = app.groups.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert!(names.len() > 150, "{}", names.len());
    }

    #[test]
    fn same_group_and_version_share_structure() {
        let app = AppModel::new(1, 0, &AppSpec { id: 1001, weight: 1 }, 100_000);
        let group = &app.groups[0];
        let (mut a, mut b) = (String::new(), String::new());
        write_error(&mut a, &app.names, group, 2, &mut SplitMix::new(1, 1));
        write_error(&mut b, &app.names, group, 2, &mut SplitMix::new(1, 1));
        assert_eq!(a, b);
        b.clear();
        write_error(&mut b, &app.names, group, 2, &mut SplitMix::new(2, 2));
        assert_eq!(a.lines().count(), b.lines().count());
    }

    #[test]
    fn expands_placeholders() {
        let app = AppModel::new(1, 0, &AppSpec { id: 5, weight: 1 }, 1000);
        let ctx = Ctx { names: &app.names, class: Class("Cart", "Adapter"), version: 0 };
        let mut buf = String::new();
        expand(&mut buf, "path $ $c at $o/$p, x$", &ctx, &mut SplitMix::new(0, 0));
        let expected = format!("path $ CartAdapter at {}/{}, x$", app.names.host, app.names.java_package);
        assert_eq!(buf, expected);
    }
}
